// Command oml is the operator's toolkit for the oml memory store: the signed
// PostgreSQL journal, its outbox, and the Delta Lake lakehouse fed from it.
package main

import (
	"os"

	"github.com/omlhq/oml/internal/cli"
)

func main() {
	os.Exit(int(cli.Main()))
}

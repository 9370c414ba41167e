// Command gendocs writes the command reference (docs/reference/) from oml's
// command tree: `make docs`, run from the repository root.
package main

import (
	"fmt"
	"os"

	"github.com/omlhq/oml/internal/docstest"
)

func main() {
	if err := docstest.WriteReference(docstest.ReferenceDir, docstest.Reference(docstest.Root())); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

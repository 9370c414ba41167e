package delta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

// raceChildEnv makes the test binary act as one committing process of
// TestTwoProcessCommitRace instead of running tests.
const raceChildEnv = "OML_DELTA_RACE_CHILD"

// TestMain stops the shared S3 test server (started on first use) after
// the package's tests, or runs a race child.
func TestMain(m *testing.M) {
	if url := os.Getenv(raceChildEnv); url != "" {
		os.Exit(raceChild(url, os.Getenv("OML_DELTA_RACE_APP")))
	}
	code := s3test.Main(m)
	if bigTableDir != "" {
		os.RemoveAll(bigTableDir) // the 10,000-commit benchmark table
	}
	os.Exit(code)
}

// raceChild opens a writer on the table at url (file:// or s3://, S3
// settings from the AWS environment), says "ready", waits for "go" on
// stdin, commits once, and prints won, conflict or error.
func raceChild(url, app string) int {
	ctx := context.Background()
	fs, err := store.Open(ctx, url)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	w, err := OpenWriter(ctx, fs, Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{{Path: "part-" + app + ".parquet", PartitionValues: map[string]*string{}, Size: 1, DataChange: true}},
		Txn: &Txn{AppID: app, Version: 1}})
	var ce *ConflictError
	switch {
	case err == nil:
		fmt.Println("won")
	case errors.As(err, &ce) && len(ce.Winners) == 1:
		fmt.Println("conflict")
	default:
		fmt.Println("error:", err)
	}
	return 0
}

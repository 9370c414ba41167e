package lakewriter_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrain_TableRestoredBehindTheWriter_ProbedAndRowsApplied: the writer
// skips the probe for missed rows of a table it knows complete — but only
// at the txn version it knew it at. A table whose log was put back to an
// older copy behind the running writer's back (its writer closed, so the
// next batch reopens it from that log) is probed again, and the rows the
// copy lacks are applied before the batch: the lake is exactly the journal.
func TestDrain_TableRestoredBehindTheWriter_ProbedAndRowsApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	dir := t.TempDir()
	lake, err := store.Open(ctx, "file://"+dir)
	require.NoError(t, err)
	o := b.opts(lake)
	o.MaxOpenTables = 1 // every table is reopened from its log when next touched
	d, err := lakewriter.New(o)
	require.NoError(t, err)

	b.load(t, workload.Config{Claims: 3, Seed: 11})
	b.drainAll(t, d)
	table := filepath.Join(dir, filepath.FromSlash(bronze.Key(b.tenants[0]).Path()))
	saved := filepath.Join(t.TempDir(), "bronze")
	require.NoError(t, os.CopyFS(saved, os.DirFS(table)))

	b.load(t, workload.Config{Claims: 3, Seed: 12})
	b.drainAll(t, d)
	// A batch of the other tenant's only: the one table writer kept open
	// is one of its tables, never the table put back below. (Which table
	// a batch touching all of them leaves open depends on which of its
	// parallel commits ends last; an open writer commits on its own
	// snapshot, and the copy put back behind it would then get a gap.)
	b.load(t, workload.Config{Tenants: b.tenants[1:], Claims: 1, Seed: 14})
	b.drainAll(t, d)
	// Put the older copy back: the table's txn version is now below the
	// frontier, and the rows of the second round are not in it.
	require.NoError(t, os.RemoveAll(table))
	require.NoError(t, os.CopyFS(table, os.DirFS(saved)))

	b.load(t, workload.Config{Claims: 3, Seed: 13})
	b.drainAll(t, d)
	b.verifyLake(t, lake)
}

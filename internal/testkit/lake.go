package testkit

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// ReadRows reads every live row of the Delta table at st (each row a copy
// the caller may edit), with the snapshot it read them from.
func ReadRows(t testing.TB, st store.Store) (*delta.Snapshot, []pq.Row) {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	var rows []pq.Row
	require.NoError(t, snap.Scan(ctx, st, delta.ScanOptions{}, func(_ *delta.Add, rs []pq.Row) error {
		for _, r := range rs {
			rows = append(rows, append(pq.Row(nil), r...))
		}
		return nil
	}))
	return snap, rows
}

// RewriteTable replaces every live file of the Delta table at st with one
// file holding edit(rows) (the table's rows, in scan order), in one commit
// with no txn action: a hand-made change, as an operator or a foreign
// engine would make it. It returns the file it added.
func RewriteTable(t testing.TB, st store.Store, edit func([]pq.Row) []pq.Row) *delta.Add {
	t.Helper()
	ctx := context.Background()
	w, err := delta.OpenWriter(ctx, st, delta.Options{})
	require.NoError(t, err)
	var rows []pq.Row
	require.NoError(t, w.Snapshot().Scan(ctx, st, delta.ScanOptions{}, func(_ *delta.Add, rs []pq.Row) error {
		for _, r := range rs {
			rows = append(rows, append(pq.Row(nil), r...))
		}
		return nil
	}))
	c := delta.Commit{Operation: "WRITE"}
	for _, f := range w.Snapshot().Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		rm, err := w.Remove(p)
		require.NoError(t, err)
		c.Removes = append(c.Removes, rm)
	}
	add, err := w.WriteFile(ctx, map[string]*string{}, edit(rows))
	require.NoError(t, err)
	c.Adds = []*delta.Add{add}
	_, err = w.Commit(ctx, c)
	require.NoError(t, err)
	return add
}

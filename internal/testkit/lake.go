package testkit

import (
	"context"
	"errors"
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
	snap, err := delta.Load(context.Background(), st)
	require.NoError(t, err)
	return snap, scan(t, st, snap, nil)
}

// Read says what ReadTable reads: which columns (none: all) of which
// version (zero: the latest).
type Read struct {
	Columns []string
	At      delta.LoadOptions
}

// ReadTable reads the live rows of the Delta table at st as ReadRows does,
// straight from its files and independently of the engine's readers, and
// gives nil when there is no table (a tenant's table the drain has not yet
// created).
func ReadTable(t testing.TB, st store.Store, r Read) []pq.Row {
	t.Helper()
	snap, err := delta.Load(context.Background(), st, r.At)
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil
	}
	require.NoError(t, err)
	return scan(t, st, snap, r.Columns)
}

// ReadLakeTable is ReadTable on the table at path in lake.
func ReadLakeTable(t testing.TB, lake store.Store, path string, r Read) []pq.Row {
	t.Helper()
	st, err := store.Sub(lake, path)
	require.NoError(t, err)
	return ReadTable(t, st, r)
}

func scan(t testing.TB, st store.Store, snap *delta.Snapshot, cols []string) []pq.Row {
	t.Helper()
	var rows []pq.Row
	require.NoError(t, snap.Scan(context.Background(), st, delta.ScanOptions{Columns: cols}, func(_ *delta.Add, rs []pq.Row) error {
		for _, r := range rs {
			rows = append(rows, append(pq.Row(nil), r...))
		}
		return nil
	}))
	return rows
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
	rows := scan(t, st, w.Snapshot(), nil)
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

// FileLake is an empty lake on the file store in a directory removed when
// the test ends.
func FileLake(t testing.TB) store.Store {
	t.Helper()
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	return lake
}

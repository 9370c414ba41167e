package delta

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

func optimizeTable(t testing.TB, st store.Store) *Writer {
	t.Helper()
	ctx := context.Background()
	schema := &StructType{Fields: []StructField{Field("seq", Prim(TypeLong), false), Field("k", Prim(TypeString), true), Field("p", Prim(TypeString), true)}}
	w, err := CreateTable(ctx, st, TableSpec{Schema: schema, PartitionColumns: []string{"p"}}, Options{})
	require.NoError(t, err)
	for i := int64(0); i < 10; i++ {
		p := []string{"a", "b"}[i%2]
		add, err := w.WriteFile(ctx, map[string]*string{"p": &p}, []pq.Row{{i, string(rune('z' - i))}, {i + 100, nil}})
		require.NoError(t, err)
		_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{add}, Txn: &Txn{AppID: "oml-lakewriter", Version: i + 1}})
		require.NoError(t, err)
	}
	return w
}

func scanAll(t *testing.T, st store.Store) []string {
	t.Helper()
	snap, err := Load(context.Background(), st)
	require.NoError(t, err)
	var out []string
	require.NoError(t, snap.Scan(context.Background(), st, ScanOptions{}, func(_ *Add, rows []pq.Row) error {
		for _, r := range rows {
			out = append(out, fmt.Sprint(r...))
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

func TestOptimizeCompactsPerPartitionAndKeepsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := optimizeTable(t, st)
	before := scanAll(t, st)
	res, err := Optimize(ctx, w, OptimizeOptions{SortBy: []string{"k"}})
	require.NoError(t, err)
	require.Equal(t, int64(11), res.Version)
	require.Equal(t, 10, res.FilesRemoved)
	require.Equal(t, 2, res.FilesAdded)
	require.Equal(t, int64(20), res.Rows)
	require.Equal(t, before, scanAll(t, st))
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 2, snap.NumFiles())
	for _, f := range snap.Files() {
		require.False(t, f.DataChange)
		require.Contains(t, f.Stats, `"numRecords":10`)
	}
	for _, r := range snap.Tombstones() {
		require.False(t, r.DataChange)
	}
	v, _ := snap.TxnVersion("oml-lakewriter")
	require.Equal(t, int64(10), v, "compaction leaves the txn alone")
	// Nothing left to do.
	res, err = Optimize(ctx, w, OptimizeOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(-1), res.Version)
}

// TestOptimizeRacingWriter: an append committed in between is fine (the
// compaction is re-validated and lands next); a commit that removed one of
// the compacted files makes it abandon without publishing anything.
func TestOptimizeRacingWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		removeOne bool
	}{{"concurrent-append", false}, {"concurrent-remove", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := store.NewMem()
			optimizeTable(t, mem)
			other, err := OpenWriter(ctx, mem, Options{})
			require.NoError(t, err)
			fired := false
			fs := store.NewFaulty(mem, store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000011.json", Kind: store.FaultDelay, Times: 1,
				Match: func(store.OpKind, string) bool {
					if fired {
						return false
					}
					fired = true
					c := Commit{Operation: "WRITE", Txn: &Txn{AppID: "oml-lakewriter", Version: 11}}
					if tc.removeOne {
						key, _ := DecodePath(other.Snapshot().Files()[0].Path)
						rm, err := other.Remove(key)
						require.NoError(t, err)
						c.Removes = []*Remove{rm}
					} else {
						p := "a"
						add, err := other.WriteFile(ctx, map[string]*string{"p": &p}, []pq.Row{{int64(999), "x"}})
						require.NoError(t, err)
						c.Adds = []*Add{add}
					}
					_, err := other.Commit(ctx, c)
					require.NoError(t, err)
					return false
				}})
			w, err := OpenWriter(ctx, fs, Options{})
			require.NoError(t, err)
			before := len(scanAll(t, mem))
			res, err := Optimize(ctx, w, OptimizeOptions{})
			after := scanAll(t, mem)
			if tc.removeOne {
				require.ErrorIs(t, err, ErrOptimizeAbandoned)
				require.True(t, res.Abandoned)
				require.Equal(t, before-2, len(after))
				snap, err := Load(ctx, mem)
				require.NoError(t, err)
				require.Equal(t, int64(11), snap.Version())
				return
			}
			require.NoError(t, err)
			require.Equal(t, int64(12), res.Version)
			require.Equal(t, before+1, len(after))
		})
	}
}

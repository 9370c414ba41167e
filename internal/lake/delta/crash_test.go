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

// drainBatches is a miniature lake writer: for each batch not yet recorded
// in the table's txn it writes a data file and commits it with the txn,
// then checkpoints when due. It stops at the first error.
func drainBatches(ctx context.Context, st store.Store, batches []int64) error {
	w, err := OpenWriter(ctx, st, Options{CheckpointInterval: 1})
	if err != nil {
		return err
	}
	for _, b := range batches {
		if v, ok := w.Snapshot().TxnVersion("oml-lakewriter"); ok && v >= b {
			continue
		}
		add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{b}})
		if err != nil {
			return err
		}
		if _, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{add}, Txn: &Txn{AppID: "oml-lakewriter", Version: b}}); err != nil {
			return err
		}
		if _, _, err := w.MaybeCheckpoint(ctx); err != nil {
			return err
		}
	}
	return nil
}

// TestCrashAtEveryWriteThenRestartIsExactlyOnce crashes the writer at every
// store write (applied or not), restarts on what survived, and checks that
// the table always opens and ends with each batch exactly once.
func TestCrashAtEveryWriteThenRestartIsExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := store.NewMem()
	_, err := CreateTable(ctx, base, TableSpec{Schema: &StructType{Fields: []StructField{Field("seq", Prim(TypeLong), false)}}}, Options{})
	require.NoError(t, err)
	batches := []int64{1, 2, 3}
	for n := 0; n < 4*len(batches); n++ {
		for _, apply := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d/applied=%t", n, apply), func(t *testing.T) {
				t.Parallel()
				mem := base.CrashClone()
				mem.CrashAt(n, apply)
				require.Error(t, drainBatches(ctx, mem, batches), "the crash must surface")
				restarted := mem.CrashClone()
				// Whatever survived is a valid table.
				_, err := Load(ctx, restarted)
				require.NoError(t, err)
				require.NoError(t, drainBatches(ctx, restarted, batches))
				snap, err := Load(ctx, restarted)
				require.NoError(t, err)
				v, _ := snap.TxnVersion("oml-lakewriter")
				require.Equal(t, int64(3), v)
				var got []int64
				require.NoError(t, snap.Scan(ctx, restarted, ScanOptions{}, func(_ *Add, rows []pq.Row) error {
					for _, r := range rows {
						got = append(got, r[0].(int64))
					}
					return nil
				}))
				sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
				require.Equal(t, batches, got, "each batch exactly once")
				replay, err := Load(ctx, restarted, jsonOnly())
				require.NoError(t, err)
				require.Equal(t, stateOf(replay), stateOf(snap))
			})
		}
	}
}

package outboxprune_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// crashAt fails the first time the writer reaches p once `after` batches
// have completed, and every crash point after it (the process is dead).
// batchDone is the writer's OnBatch.
func crashAt(p lakewriter.CrashPoint, after int) (hook func(lakewriter.CrashPoint, tables.TableKey) error, batchDone func(lakewriter.BatchResult), fired func() bool) {
	var mu sync.Mutex
	batches, done := 0, false
	return func(got lakewriter.CrashPoint, _ tables.TableKey) error {
			mu.Lock()
			defer mu.Unlock()
			if done {
				return errors.New("the process is already dead")
			}
			if got == p && batches >= after {
				done = true
				return errors.New("injected crash")
			}
			return nil
		}, func(lakewriter.BatchResult) {
			mu.Lock()
			batches++
			mu.Unlock()
		}, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return done
		}
}

// A crash in the middle of a batch (one table committed, the others and
// the frontier not), then a prune, then the restart: the interrupted
// batch's rows were kept (they are above the frontier cache), the replay
// finishes it, and the lake is exactly the one a clean drain makes
// (compared table by table with a lake drained without crash or prune)
// and the journal fold (reconcile).
func TestPrune_CrashMidBatchThenPruneThenRecoverGivesTheExactLake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, point := range []lakewriter.CrashPoint{lakewriter.AfterTableCommit, lakewriter.BeforeFrontierUpdate} {
		t.Run(string(point), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 3)
			b.load(t, workload.Config{Claims: 20, Seed: 41})

			// The reference: a clean drain into its own lake, then the
			// frontier cache forgotten so the crashing writer starts fresh.
			ref := store.NewMem()
			b.DrainAll(t, b.drainer(t, ref, nil))
			_, err := b.Pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = 0, batch_start = NULL, batch_end = NULL`)
			require.NoError(t, err)

			lake := store.NewMem()
			hook, batchDone, fired := crashAt(point, 2)
			d := b.drainer(t, lake, func(o *lakewriter.Options) { o.Crash, o.OnBatch = hook, batchDone })
			_, err = d.DrainOnce(ctx)
			require.ErrorIs(t, err, lakewriter.ErrCrashed)
			require.True(t, fired())

			var frontier int64
			require.NoError(t, b.Pool.QueryRow(ctx, `SELECT frontier FROM oml.lake_frontier`).Scan(&frontier))
			require.Positive(t, frontier)
			aboveFrontier := b.countWhere(t, `seq > $1`, frontier)
			res := b.prune(t, lake, false)
			require.Positive(t, res.Rows, "the applied rows below the frontier are pruned")
			require.Equal(t, aboveFrontier, b.countWhere(t, `seq > $1`, frontier), "the interrupted batch's rows are kept")

			b.DrainAll(t, b.drainer(t, lake, nil))
			for _, tn := range b.Tenants {
				for _, k := range []tables.Kind{tables.Bronze, tables.Silver} {
					key := tables.TableKey{Tenant: tn, Kind: k}
					require.Equal(t, tableRows(t, ref, key, false), tableRows(t, lake, key, false), "%s", key)
				}
			}
			b.reconcileClean(t, lake)
			b.prune(t, lake, false)
			require.Zero(t, b.outboxRows(t), "every row applied: the outbox is empty")
			b.reconcileClean(t, lake)
		})
	}
}

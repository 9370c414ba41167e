package outboxprune_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/workload"
)

// After a prune, a table deleted from the store is rebuilt from seq 0
// with the pruned rows re-derived from the journal: the rebuilt table holds
// exactly the rows it held before (outbox_seq aside, which a re-derived row
// cannot know), reconcile is clean, and the outbox has shrunk to what the
// lake has not applied plus the dead-lettered rows. File and S3.
func TestPrune_RebuildOfADeletedTableGivesTheExactLake(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, 2)
			lake := newLake(t, kind)
			b.load(t, workload.Config{Claims: 25, Seed: 13, Poison: 2})
			b.DrainAll(t, b.drainer(t, lake, nil))
			b.reconcileClean(t, lake)

			before := b.outboxRows(t)
			dry := b.prune(t, lake, true)
			require.Positive(t, dry.Rows)
			require.Equal(t, before, b.outboxRows(t), "--dry-run deletes nothing")

			res := b.prune(t, lake, false)
			require.Equal(t, dry.Rows, res.Rows, "the dry run counts what the run deletes")
			require.Greater(t, res.Batches, 1, "bounded batches")
			var dead int64
			require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter d JOIN oml.outbox o ON o.seq = d.outbox_seq`).Scan(&dead))
			require.EqualValues(t, 2, dead, "dead-lettered rows are never pruned")
			// Everything is applied: what is left is the dead-lettered rows
			// and the rows of tables the lake does not hold (gold.lineage has
			// none).
			require.Equal(t, dead, b.outboxRows(t), "the outbox shrinks to what is not applied")
			b.reconcileClean(t, lake)

			// Delete two tables of tenant 0 and rebuild them.
			var want = map[tables.TableKey][]string{}
			for _, k := range []tables.Kind{tables.Bronze, tables.Silver} {
				key := tables.TableKey{Tenant: b.Tenants[0], Kind: k}
				want[key] = tableRows(t, lake, key, true)
				require.NotEmpty(t, want[key])
				deleteTable(t, lake, key)
			}
			d := b.drainer(t, lake, nil)
			_, err := d.DrainOnce(ctx)
			require.NoError(t, err)
			for key, rows := range want {
				require.Equal(t, rows, tableRows(t, lake, key, true), "%s rebuilt from the journal", key)
			}
			b.reconcileClean(t, lake)

			// And the writer goes on normally: more work, drained, pruned,
			// still exact.
			b.load(t, workload.Config{Claims: 10, Seed: 14, FirstRound: 1})
			b.DrainAll(t, d)
			b.prune(t, lake, false)
			b.reconcileClean(t, lake)
			require.Equal(t, dead, b.outboxRows(t))
		})
	}
}

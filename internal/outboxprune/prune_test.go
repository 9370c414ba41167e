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

// TestPrune_RebuildOfTablesTheLastBatchAloneTouched_GivesTheExactLake: the
// newest batch touched only tenant 0's tables, everything was pruned, and
// then exactly those tables were deleted. The lake's newest commit is now
// older than the prune mark of the deleted tables, so the restarted writer
// resumes below the mark: the rebuild must still take the tables through
// their prune mark (every pruned row is re-derived from the journal), not
// stop at the resume point and leave them held below it.
func TestPrune_RebuildOfTablesTheLastBatchAloneTouched_GivesTheExactLake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	lake := newLake(t, "file")
	b.load(t, workload.Config{Claims: 20, Seed: 23})
	b.DrainAll(t, b.drainer(t, lake, nil))
	// The last batch: tenant 0 only.
	b.load(t, workload.Config{Claims: 6, Seed: 24, FirstRound: 1, Tenants: b.Tenants[:1]})
	b.DrainAll(t, b.drainer(t, lake, nil))
	b.prune(t, lake, false)
	require.Zero(t, b.outboxRows(t), "every row is applied and pruned")

	want := map[tables.TableKey][]string{}
	for _, k := range tables.Kinds {
		key := tables.TableKey{Tenant: b.Tenants[0], Kind: k}
		if rows := tableRows(t, lake, key, true); rows != nil {
			want[key] = rows
			deleteTable(t, lake, key)
		}
	}
	require.NotEmpty(t, want)
	d := b.drainer(t, lake, nil)
	sum, err := d.DrainOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, sum.HeldTables, "no rebuilt table is held below its prune mark")
	for key, rows := range want {
		require.Equal(t, rows, tableRows(t, lake, key, true), "%s rebuilt through its prune mark", key)
	}
	b.reconcileClean(t, lake)

	// The rebuilt tables are at their prune mark, not below it: new rows
	// for them apply, in this run and after a restart.
	b.load(t, workload.Config{Claims: 4, Seed: 25, FirstRound: 2, Tenants: b.Tenants[:1]})
	sum, err = d.DrainOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, sum.HeldTables, "the next batch of a rebuilt table is not held below its prune mark")
	b.load(t, workload.Config{Claims: 4, Seed: 26, FirstRound: 3, Tenants: b.Tenants[:1]})
	sum, err = b.drainer(t, lake, nil).DrainOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, sum.HeldTables, "nor after a restart")
	b.reconcileClean(t, lake)
}

// TestPrune_WholeLakeLostAfterPrune_RebuiltExactlyFromTheJournal: after a
// prune the whole lake is gone (a new, empty bucket; a deleted root). The
// writer starting on the empty lake must rebuild every table with its
// pruned rows re-derived from the journal — a drain of what is left in the
// outbox alone would silently lose every pruned row.
func TestPrune_WholeLakeLostAfterPrune_RebuiltExactlyFromTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	lake := newLake(t, "file")
	b.load(t, workload.Config{Claims: 20, Seed: 33, Poison: 1})
	b.DrainAll(t, b.drainer(t, lake, nil))
	b.prune(t, lake, false)
	// Some rows newer than the prune, still in the outbox.
	b.load(t, workload.Config{Claims: 5, Seed: 34, FirstRound: 1})
	b.DrainAll(t, b.drainer(t, lake, nil))

	want := map[tables.TableKey][]string{}
	for _, tn := range b.Tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: tn, Kind: k}
			if rows := tableRows(t, lake, key, true); rows != nil {
				want[key] = rows
			}
		}
	}
	require.NotEmpty(t, want)
	empty := newLake(t, "file")
	d := b.drainer(t, empty, nil)
	b.DrainAll(t, d)
	for key, rows := range want {
		require.Equal(t, rows, tableRows(t, empty, key, true), "%s rebuilt from the journal and the outbox", key)
	}
	b.reconcileClean(t, empty)
	_ = ctx
}

package lakewriter_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// What a batch holds while it waits for its commits (docs/lake-writer.md,
// memory): two batches are in memory at once on a backlog (the one being
// committed and the one read ahead), so what each row keeps is bounded.

// TestBatchRead_EveryKindOfRow_KeepsOnlyWhatItsCommitNeedsAfterTheRowCheck:
// once checked, no row of a batch holds its cited journal event or its
// decoded payload (a second copy of a bronze row's payload, the only copy
// of the others'), except a gold.workareas row's payload, which its commit
// folds into the workarea's row, with the event's time.
func TestBatchRead_EveryKindOfRow_KeepsOnlyWhatItsCommitNeedsAfterTheRowCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 20, Seed: 31, PromoteRatio: 0.8, RetractRatio: 0.4})
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	held, noTime, rows, err := lakewriter.CheckOnlyLeft(ctx, tx, 0, b.lastSeq(t))
	require.NoError(t, err)
	require.Greater(t, rows, 40)
	require.Zero(t, held, "rows still holding what only the row check needed")
	require.Zero(t, noTime, "gold.workareas rows without their event's time")
}

// TestApplyBatch_OneTableAtATime_RowsOfCommittedTablesAreLetGoBeforeTheNextCommits:
// while a batch's tables commit, the rows of the tables already committed
// are garbage (the batch shrinks as it commits, while the next one is read
// ahead), not held until its last table is done.
func TestApplyBatch_OneTableAtATime_RowsOfCommittedTablesAreLetGoBeforeTheNextCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 10, Seed: 32, PromoteRatio: 1})
	d, err := lakewriter.New(b.opts(store.NewMem()))
	require.NoError(t, err)
	stillHeld, applied, err := d.ApplyOneTableAtATime(ctx, 0, b.lastSeq(t))
	require.NoError(t, err)
	require.GreaterOrEqual(t, applied, 6)
	require.Len(t, stillHeld, applied, "one report per table commit")
	for i, n := range stillHeld {
		require.Zero(t, n, "at table commit %d: rows of tables committed before it still reachable", i)
	}
}

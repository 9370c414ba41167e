package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/workload"
)

// TestMaintain_Gold_OptimizeCheckpointVacuum_LineageStillEqualsTheJournal:
// gold.lineage drained in many small batches is compacted, checkpointed
// and (31 days on) vacuumed by oml lake maintain like the other tables;
// its txn version does not move, and reconcile (which compares gold with
// the journal row by row) is clean before and after.
func TestMaintain_Gold_OptimizeCheckpointVacuum_LineageStillEqualsTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := drainedSmall(t, 31)
	gold := b.firstTenantTable(t, tables.Gold)
	before, err := delta.Load(ctx, gold.Store)
	require.NoError(t, err)
	require.Greater(t, before.NumFiles(), 5, "many small gold files")
	txn, _ := before.TxnVersion(tables.AppID)
	rows := len(readRows(t, gold.Store))
	b.requireReconcileClean(t)

	reps, err := maintain.Run(ctx, []maintain.Table{gold}, maintain.RunOptions{Policy: maintain.Policy{MinSmallFiles: 2, CheckpointInterval: 2}})
	require.NoError(t, err)
	require.Empty(t, reps[0].Error)
	require.Contains(t, tasks(reps[0].Plan), maintain.TaskOptimize)
	require.Contains(t, tasks(reps[0].Plan), maintain.TaskCheckpoint)
	after, err := delta.Load(ctx, gold.Store)
	require.NoError(t, err)
	require.Less(t, after.NumFiles(), before.NumFiles())
	got, _ := after.TxnVersion(tables.AppID)
	require.Equal(t, txn, got, "maintenance never moves the lake writer's txn version")
	require.Len(t, readRows(t, gold.Store), rows)
	b.requireReconcileClean(t)

	later := func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	reps, err = maintain.Run(ctx, []maintain.Table{gold}, maintain.RunOptions{Now: later, Policy: maintain.Policy{VacuumMinFiles: 1}})
	require.NoError(t, err)
	require.Contains(t, tasks(reps[0].Plan), maintain.TaskVacuum)
	require.NotZero(t, reps[0].Vacuumed.Deleted)
	require.Len(t, readRows(t, gold.Store), rows)
	b.requireReconcileClean(t)
}

// TestMaintain_Workareas_OptimizeCheckpointVacuum_RowsStillEqualTheFold:
// gold.workareas, MERGEd batch after batch (each MERGE removes the files it
// rewrites), is checkpointed, compacted and (31 days on) vacuumed by oml
// lake maintain like the other tables: its rows and txn version do not
// change, the files the MERGEs removed are deleted, and reconcile (which
// compares each workarea's row with the journal) is clean throughout.
func TestMaintain_Workareas_OptimizeCheckpointVacuum_RowsStillEqualTheFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := drainedSmall(t, 32)
	kind, err := maintain.ParseKind("workareas")
	require.NoError(t, err)
	areas := b.firstTenantTable(t, kind)
	before, err := delta.Load(ctx, areas.Store)
	require.NoError(t, err)
	require.Greater(t, before.Version(), int64(5), "many MERGE commits")
	txn, _ := before.TxnVersion(tables.AppID)
	rows := readRows(t, areas.Store)
	b.requireReconcileClean(t)

	reps, err := maintain.Run(ctx, []maintain.Table{areas}, maintain.RunOptions{Policy: maintain.Policy{MinSmallFiles: 2, CheckpointInterval: 2}})
	require.NoError(t, err)
	require.Empty(t, reps[0].Error)
	require.Contains(t, tasks(reps[0].Plan), maintain.TaskCheckpoint)
	after, err := delta.Load(ctx, areas.Store)
	require.NoError(t, err)
	got, _ := after.TxnVersion(tables.AppID)
	require.Equal(t, txn, got, "maintenance never moves the lake writer's txn version")
	require.ElementsMatch(t, rows, readRows(t, areas.Store))
	b.requireReconcileClean(t)

	later := func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	reps, err = maintain.Run(ctx, []maintain.Table{areas}, maintain.RunOptions{Now: later, Policy: maintain.Policy{VacuumMinFiles: 1}})
	require.NoError(t, err)
	require.Contains(t, tasks(reps[0].Plan), maintain.TaskVacuum)
	require.NotZero(t, reps[0].Vacuumed.Deleted, "the files the MERGEs removed are vacuumed")
	require.ElementsMatch(t, rows, readRows(t, areas.Store))
	b.requireReconcileClean(t)
}

// drainedSmall drains a one-tenant workload (seed) whose claims change
// several times in batches of four rows: many small gold files and MERGE
// commits for maintenance to work on.
func drainedSmall(t *testing.T, seed uint64) *bundle {
	t.Helper()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 40, Seed: seed, PromoteRatio: 0.9, RetractRatio: 0.7, FollowUpRatio: 0.8})
	b.drainAll(t, b.drainer(t, 4))
	return b
}

package lakerepair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// TestRepair_GoldLineagePlantedRows_RepairedReconcileClean: a lineage row
// removed, one copied, one changed and one invented in gold.lineage are
// each found by reconcile; oml lake repair (per journal event: every
// lineage row of an affected event removed and put back by the drain's own
// row code) makes reconcile clean, the invented row is archived, and a
// second repair has nothing to do.
func TestRepair_GoldLineagePlantedRows_RepairedReconcileClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	d := testkit.NewDeployment(t, 1)
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	tn := d.Tenants[0]
	_, err = workload.Run(ctx, e.pool, e.key, workload.Config{Tenants: d.Tenants, Claims: 30, Seed: 12,
		PromoteRatio: 0.8, RetractRatio: 0.7, FollowUpRatio: 0.8})
	require.NoError(t, err)
	e.drain(t)
	requireChecksGreen(t, e)

	const inventedSeq = 80001
	rewriteTable(t, tableStore(t, lake, tn, tables.Gold), func(rs []pq.Row) []pq.Row {
		require.GreaterOrEqual(t, len(rs), 4)
		rs[2][tables.LineageActor] = "mallory"
		invented := append(pq.Row(nil), rs[3]...)
		invented[tables.LineageJournalSeq] = int64(inventedSeq)
		out := append([]pq.Row(nil), rs[1:]...) // rs[0] removed
		return append(out, append(pq.Row(nil), rs[1]...), invented)
	})
	rep, err := reconcile.Run(ctx, e.pool, lake, reconcile.Options{StaleAfter: 1 << 62, TempDir: t.TempDir()})
	require.NoError(t, err)
	for _, c := range []reconcile.Class{reconcile.MissingInLake, reconcile.UnexpectedInLake, reconcile.DuplicateInLake, reconcile.DigestMismatch} {
		require.Equal(t, int64(1), rep.Counts[c], "reconcile finds one %s: %+v", c, rep.Findings)
	}

	res, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Remaining, "%+v %+v", res.Plan.NotRepaired, res.Plan.Tables)
	require.NotEmpty(t, res.Repaired)
	requireChecksGreen(t, e)
	archived := false
	for _, rows := range archivedRows(t, lake, tables.Gold, "journal_seq", "actor") {
		for _, r := range rows {
			archived = archived || r[0].(int64) == inventedSeq
		}
	}
	require.True(t, archived, "the invented lineage row is archived")
	e.drain(t)
	again, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.True(t, again.Nothing(), "%+v", again.Plan)
}

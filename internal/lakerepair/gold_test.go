package lakerepair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
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
	const inventedSeq = 80001
	e, lake := repairPlanted(t, 12, tables.Gold, reconcile.DigestMismatch, func(rs []pq.Row) []pq.Row {
		require.GreaterOrEqual(t, len(rs), 4)
		rs[2][tables.LineageActor] = "mallory"
		invented := append(pq.Row(nil), rs[3]...)
		invented[tables.LineageJournalSeq] = int64(inventedSeq)
		out := append([]pq.Row(nil), rs[1:]...) // rs[0] removed
		return append(out, append(pq.Row(nil), rs[1]...), invented)
	})
	archived := false
	for _, rows := range archivedRows(t, lake, tables.Gold, "journal_seq", "actor") {
		for _, r := range rows {
			archived = archived || r[0].(int64) == inventedSeq
		}
	}
	require.True(t, archived, "the invented lineage row is archived")
	e.drain(t)
	e.requireNothingToRepair(t)
}

// TestRepair_GoldWorkareasPlantedRows_RepairedReconcileClean: a workarea's
// row removed, one copied, one with a wrong count and one invented are
// each found by reconcile; oml lake repair (per workarea: every copy out,
// the sum of its changes at the table's txn version in, built by the
// drain's own code) makes reconcile clean, and a second repair has
// nothing to do.
func TestRepair_GoldWorkareasPlantedRows_RepairedReconcileClean(t *testing.T) {
	t.Parallel()
	e, _ := repairPlanted(t, 13, tables.Workareas, reconcile.StateMismatch, func(rs []pq.Row) []pq.Row {
		require.GreaterOrEqual(t, len(rs), 4)
		c := tables.DecodeWorkarea(rs[2])
		c.Promoted += 5
		invented := tables.DecodeWorkarea(rs[3])
		invented.WorkareaID = "wa-invented"
		out := append([]pq.Row(nil), rs[1:]...) // rs[0] removed
		out[1] = c.Row()
		return append(out, append(pq.Row(nil), rs[1]...), invented.Row())
	})
	e.drain(t)
	e.requireNothingToRepair(t)
}

// repairPlanted drains a one-tenant workload (seed) with follow-ups into
// gold, rewrites the tenant's table of kind with plant (which removes one
// row, copies one, invents one and changes one, the change found as
// changed), requires reconcile to find one of each, and repairs it all:
// the checks are green again.
func repairPlanted(t *testing.T, seed uint64, kind tables.Kind, changed reconcile.Class, plant func([]pq.Row) []pq.Row) (*env, store.Store) {
	t.Helper()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	d := testkit.NewDeployment(t, 1)
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	testkit.Load(t, e.pool, e.key, workload.Config{Tenants: d.Tenants, Claims: 30, Seed: seed,
		PromoteRatio: 0.8, RetractRatio: 0.7, FollowUpRatio: 0.8})
	e.drain(t)
	requireChecksGreen(t, e)

	testkit.RewriteTable(t, tableStore(t, lake, d.Tenants[0], kind), plant)
	rep, err := reconcile.Run(ctx, e.pool, lake, reconcile.Options{StaleAfter: 1 << 62, TempDir: t.TempDir()})
	require.NoError(t, err)
	for _, c := range []reconcile.Class{reconcile.MissingInLake, reconcile.UnexpectedInLake, reconcile.DuplicateInLake, changed} {
		require.Equal(t, int64(1), rep.Counts[c], "reconcile finds one %s: %+v", c, rep.Findings)
	}

	res := e.repairAll(t)
	require.NotEmpty(t, res.Repaired)
	requireChecksGreen(t, e)
	return e, lake
}

// TestRepair_JournalOlderThanGold_RepairBackfillsLineageAndWorkareas: a
// deployment whose journal predates gold (its earlier changes have no gold
// outbox rows: here the rows are deleted before any drain, as a journal
// written before gold never had them) drains the later changes into gold;
// reconcile reports the earlier changes missing from gold.lineage and the
// workareas' rows short of the fold; oml lake repair re-derives them from
// the journal (also for a tenant whose gold tables do not exist yet), and
// reconcile, chain verify and the fold check are then clean.
func TestRepair_JournalOlderThanGold_RepairBackfillsLineageAndWorkareas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	d := testkit.NewDeployment(t, 2)
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	testkit.Load(t, e.pool, e.key, workload.Config{Tenants: d.Tenants, Claims: 20, Seed: 14,
		PromoteRatio: 0.8, RetractRatio: 0.6, FollowUpRatio: 0.6})
	tag, err := e.pool.Exec(ctx, `DELETE FROM oml.outbox WHERE target IN ('gold.lineage', 'gold.workareas')`)
	require.NoError(t, err)
	require.NotZero(t, tag.RowsAffected())
	// After the upgrade, only the first tenant changes anything.
	testkit.Load(t, e.pool, e.key, workload.Config{Tenants: d.Tenants[:1], Claims: 10, Seed: 15,
		PromoteRatio: 0.8, RetractRatio: 0.6, FollowUpRatio: 0.6})
	e.drain(t)

	rep, err := reconcile.Run(ctx, e.pool, lake, reconcile.Options{StaleAfter: 1 << 62, TempDir: t.TempDir()})
	require.NoError(t, err)
	missing := map[string]int64{}
	for _, f := range rep.Findings {
		missing[f.Table+"/"+string(f.Class)]++
	}
	require.NotZero(t, missing["gold.lineage/missing-in-lake"], "%+v", rep.Findings)
	require.NotZero(t, missing["gold.workareas/state-mismatch"]+missing["gold.workareas/missing-in-lake"], "%+v", rep.Findings)

	e.repairAll(t)
	requireChecksGreen(t, e)
	for _, tn := range d.Tenants {
		require.NotEmpty(t, readTable(t, lake, tables.TableKey{Tenant: tn, Kind: tables.Workareas}, []string{"workarea_id"}), "tenant %s has gold.workareas", tn)
	}
	// New changes after the backfill drain on top of it.
	testkit.Load(t, e.pool, e.key, workload.Config{Tenants: d.Tenants, Claims: 5, Seed: 16,
		PromoteRatio: 0.8, RetractRatio: 0.6, FollowUpRatio: 0.6})
	e.drain(t)
	requireChecksGreen(t, e)
}

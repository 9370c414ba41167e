package reconcile_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// TestReconcile_Gold_CleanThenPlantedMissingUnexpectedDuplicateAndWrongRowFound:
// a drained workload with chained changes reconciles clean, gold included;
// then one gold.lineage row is removed, one copied, one changed (its
// actor) and one invented (a change the journal does not imply): reconcile
// reports exactly a missing-in-lake, a duplicate-in-lake, a
// digest-mismatch naming the column, and an unexpected-in-lake, each with
// its journal seq and claim.
func TestReconcile_Gold_CleanThenPlantedMissingUnexpectedDuplicateAndWrongRowFound(t *testing.T) {
	t.Parallel()
	b, tn, rep := drainedGoldClean(t, 151)
	goldSum := lastTenantTable(t, rep, tables.TableKey{Tenant: tn, Kind: tables.Gold})
	require.NotZero(t, goldSum.LakeRows)
	require.Equal(t, goldSum.FoldRows, goldSum.LakeRows)

	st := tableStore(t, b, tn, tables.Gold)
	_, rows := testkit.ReadRows(t, st)
	require.GreaterOrEqual(t, len(rows), 4)
	key := func(r pq.Row) tables.GoldLineageRow { return tables.DecodeLineage(r) }
	gone, copied, changed := key(rows[0]), key(rows[1]), key(rows[2])
	invented := key(rows[3])
	invented.JournalSeq, invented.ArtifactID = invented.JournalSeq+1, "never-promoted"
	testkit.RewriteTable(t, st, func(rows []pq.Row) []pq.Row {
		out := append([]pq.Row(nil), rows[1:]...) // drop rows[0]
		out = append(out, append(pq.Row(nil), rows[1]...))
		c := append(pq.Row(nil), rows[2]...)
		c[tables.LineageActor] = "mallory"
		out[1] = c
		return append(out, invented.Row())
	})

	rep = b.reconcile(t, reconcile.Options{})
	got := requireOneEach(t, rep, reconcile.MissingInLake, reconcile.DuplicateInLake, reconcile.DigestMismatch, reconcile.UnexpectedInLake)
	for cl, want := range map[reconcile.Class]tables.GoldLineageRow{
		reconcile.MissingInLake: gone, reconcile.DuplicateInLake: copied, reconcile.DigestMismatch: changed, reconcile.UnexpectedInLake: invented,
	} {
		f := got[cl][0]
		require.Equal(t, string(tables.Gold), f.Table, "%s", cl)
		require.Equal(t, want.JournalSeq, f.Seq, "%s", cl)
		require.Equal(t, want.ArtifactID, f.ArtifactID, "%s", cl)
		require.Equal(t, want.Version, f.Version, "%s", cl)
	}
	require.Equal(t, "actor", got[reconcile.DigestMismatch][0].Evidence["column"])
	require.Equal(t, "mallory", got[reconcile.DigestMismatch][0].Evidence["lake"])
}

// TestReconcile_Workareas_CleanThenPlantedMissingUnexpectedDuplicateAndWrongRowFound:
// a drained workload over several workareas reconciles clean, gold.workareas
// included (one row per workarea, each equal to the fold); then one
// workarea's row is removed, one copied, one changed (its demoted count)
// and one invented (a workarea with no promoted claim): reconcile reports
// exactly a missing-in-lake, a duplicate-in-lake, a state-mismatch naming
// the column, and an unexpected-in-lake, each naming its workarea.
func TestReconcile_Workareas_CleanThenPlantedMissingUnexpectedDuplicateAndWrongRowFound(t *testing.T) {
	t.Parallel()
	b, tn, rep := drainedGoldClean(t, 152)
	sum := lastTenantTable(t, rep, tables.TableKey{Tenant: tn, Kind: tables.Workareas})
	require.GreaterOrEqual(t, sum.LakeRows, int64(4))
	require.Equal(t, sum.FoldRows, sum.LakeRows)

	st := tableStore(t, b, tn, tables.Workareas)
	_, rows := testkit.ReadRows(t, st)
	require.GreaterOrEqual(t, len(rows), 4)
	gone, copied, changed := tables.WorkareaOf(rows[0]), tables.WorkareaOf(rows[1]), tables.WorkareaOf(rows[2])
	invented := tables.DecodeWorkarea(rows[3])
	invented.WorkareaID = "wa-never"
	testkit.RewriteTable(t, st, func(rows []pq.Row) []pq.Row {
		out := append([]pq.Row(nil), rows[1:]...) // drop rows[0]
		out = append(out, append(pq.Row(nil), rows[1]...))
		c := tables.DecodeWorkarea(rows[2])
		c.Demoted++
		out[1] = c.Row()
		return append(out, invented.Row())
	})

	rep = b.reconcile(t, reconcile.Options{})
	got := requireOneEach(t, rep, reconcile.MissingInLake, reconcile.DuplicateInLake, reconcile.StateMismatch, reconcile.UnexpectedInLake)
	for cl, want := range map[reconcile.Class]string{
		reconcile.MissingInLake: gone, reconcile.DuplicateInLake: copied, reconcile.StateMismatch: changed, reconcile.UnexpectedInLake: invented.WorkareaID,
	} {
		f := got[cl][0]
		require.Equal(t, string(tables.Workareas), f.Table, "%s", cl)
		require.Equal(t, want, f.Workarea, "%s", cl)
	}
	require.Equal(t, "demoted", got[reconcile.StateMismatch][0].Evidence["column"])
}

// lastTenantTable is the summary of key's table in the report's last
// tenant (the one a test's setup created last).
func lastTenantTable(t *testing.T, rep *reconcile.Report, key tables.TableKey) *reconcile.TableSummary {
	t.Helper()
	last := rep.Tenants[len(rep.Tenants)-1].Tables
	for i, s := range last {
		if s.Table == key.Path() {
			return &last[i]
		}
	}
	require.Failf(t, "no table summary", "the report covers no %s", key.Path())
	return nil
}

// drainedGoldClean drains a one-tenant workload (seed) whose claims change
// several times, so gold has lineage and workarea rows, and requires
// reconcile to be clean; it returns the tenant and the clean report.
func drainedGoldClean(t *testing.T, seed uint64) (*bundle, uuid.UUID, *reconcile.Report) {
	t.Helper()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 30, Seed: seed, PromoteRatio: 0.8, RetractRatio: 0.7, FollowUpRatio: 0.8})
	require.Empty(t, b.drain(t))
	rep := b.reconcile(t, reconcile.Options{})
	requireClean(t, rep)
	return b, b.Tenants[0], rep
}

package lakerepair_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// silver column positions (lakewriter/tables.go).
const (
	colArtifact  = 0
	colVersion   = 1
	colCipherHex = 8
	colBody      = 9
	colState     = 10
)

func tableStore(t *testing.T, lake store.Store, tn uuid.UUID, k tables.Kind) store.Store {
	t.Helper()
	st, err := store.Sub(lake, tables.TableKey{Tenant: tn, Kind: k}.Path())
	require.NoError(t, err)
	return st
}

// heldClaimRow builds a silver row for a claim that was never promoted, as
// a containment breach would put it there (its held body included).
func heldClaimRow(t *testing.T, e *env, tn uuid.UUID) (pq.Row, string) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `
SELECT c.artifact_id, c.version, c.workarea_id, c.writer, c.principal, c.provenance,
       encode(c.plaintext_digest, 'hex'), encode(c.ciphertext_digest, 'hex'), b.ciphertext, c.submitted_seq
  FROM oml.claims c JOIN oml.claim_bodies b USING (tenant_id, artifact_id, version)
 WHERE c.tenant_id = $1 AND c.promoted_seq IS NULL AND c.state = 'held' LIMIT 1`, tn)
	require.NoError(t, err)
	var key string
	row, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (pq.Row, error) {
		var a, wa, wr, pr, pv, pd, cd string
		var v int32
		var body []byte
		var sub int64
		if err := r.Scan(&a, &v, &wa, &wr, &pr, &pv, &pd, &cd, &body, &sub); err != nil {
			return nil, err
		}
		key = fmt.Sprintf("%s/%d", a, v)
		return pq.Row{a, v, tn.String(), wa, wr, pr, pv, pd, cd, body, "promoted", "mallory", sub, sub + 1, sub + 1, int64(1), time.Now().UTC().Truncate(time.Microsecond)}, nil
	})
	require.NoError(t, err)
	return row, key
}

// plantRowProblems plants one problem of every row class: on tenant 0's
// silver a missing row, a digest mismatch, a state mismatch, a duplicate
// and a containment breach; on tenant 1's bronze a forged row (unexpected)
// and a duplicate; tenant 0's bronze data files lost from the store; and
// tenant 1's silver table deleted altogether. It returns the breach key.
func plantRowProblems(t *testing.T, e *env, t0, t1 uuid.UUID) string {
	t.Helper()
	ctx := context.Background()
	held, breach := heldClaimRow(t, e, t0)
	testkit.RewriteTable(t, tableStore(t, e.lake, t0, tables.Silver), func(rs []pq.Row) []pq.Row {
		var promoted []int
		for i, r := range rs {
			if r[colState] == "promoted" {
				promoted = append(promoted, i)
			}
		}
		require.GreaterOrEqual(t, len(promoted), 4)
		r := rs[promoted[1]]
		body := append(append([]byte(nil), r[colBody].([]byte)...), 0)
		sum := sha256.Sum256(body)
		r[colBody], r[colCipherHex] = body, hex.EncodeToString(sum[:])
		rs[promoted[2]][colState] = "demoted"
		out := append([]pq.Row(nil), rs[:promoted[0]]...)
		out = append(out, rs[promoted[0]+1:]...)
		return append(out, append(pq.Row(nil), rs[promoted[3]]...), held)
	})
	testkit.RewriteTable(t, tableStore(t, e.lake, t1, tables.Bronze), func(rs []pq.Row) []pq.Row {
		forged := append(pq.Row(nil), rs[0]...)
		forged[1] = int64(90001) // seq
		return append(rs, forged, append(pq.Row(nil), rs[1]...))
	})
	// Tenant 0's bronze data files are lost from the store (the log still
	// lists them): their rows are missing.
	bst := tableStore(t, e.lake, t0, tables.Bronze)
	snap, err := delta.Load(ctx, bst)
	require.NoError(t, err)
	require.NotEmpty(t, snap.Files())
	for _, f := range snap.Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		require.NoError(t, bst.Delete(ctx, p))
	}
	// Tenant 1's silver table is gone.
	sst := tableStore(t, e.lake, t1, tables.Silver)
	objs, err := sst.List(ctx, "", "")
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, sst.Delete(ctx, o.Key))
	}
	return breach
}

func newRowsEnv(t *testing.T, lake store.Store) (*env, uuid.UUID, uuid.UUID) {
	t.Helper()
	d := testkit.NewDeployment(t, 2)
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	_, err := workload.Run(context.Background(), e.pool, e.key, workload.Config{
		Tenants: d.Tenants, Claims: 30, Seed: 11, PromoteRatio: 0.7, RetractRatio: 0.3})
	require.NoError(t, err)
	e.drain(t)
	return e, d.Tenants[0], d.Tenants[1]
}

// TestRepair_EveryPlantedRowClass_FileLake_ReconcileCleanArchiveJournal:
// every row class planted against a real database and a file lake is
// found by reconcile; a dry run changes nothing; the repair fixes all of
// it (the lost file's rows come back in the same run); reconcile is clean,
// every table read file by file equals the fold, the archive holds what
// was removed (the breach's ciphertext row included), the journal holds a
// lake.repaired per tenant, and a second repair does nothing.
func TestRepair_EveryPlantedRowClass_FileLake_ReconcileCleanArchiveJournal(t *testing.T) {
	t.Parallel()
	lake := testkit.FileLake(t)
	e, t0, t1 := newRowsEnv(t, lake)
	runPlantedRows(t, e, t0, t1, true)
}

// TestRepair_PlantedRowClasses_S3Lake is the same on S3 (versitygw).
func TestRepair_PlantedRowClasses_S3Lake(t *testing.T) {
	t.Parallel()
	e, t0, t1 := newRowsEnv(t, s3test.NewBucket(t, nil).Store)
	runPlantedRows(t, e, t0, t1, true)
}

// runPlantedRows plants every row class, repairs and checks the result.
// greenBeforeDrain: the repair alone makes reconcile clean (false when a
// table is left for the drain's catch-up: see the prune test).
func runPlantedRows(t *testing.T, e *env, t0, t1 uuid.UUID, greenBeforeDrain bool) {
	t.Helper()
	ctx := context.Background()
	breach := plantRowProblems(t, e, t0, t1)

	rep, err := reconcile.Run(ctx, e.pool, e.lake, reconcile.Options{StaleAfter: time.Hour, TempDir: t.TempDir()})
	require.NoError(t, err)
	for _, c := range []reconcile.Class{reconcile.MissingInLake, reconcile.UnexpectedInLake, reconcile.DuplicateInLake,
		reconcile.DigestMismatch, reconcile.StateMismatch} {
		require.Positive(t, rep.Counts[c], "reconcile finds %s", c)
	}

	untouched := lakeObjects(t, e.lake)
	dry, err := e.repair(t, lakerepair.Options{DryRun: true})
	require.NoError(t, err)
	require.NotEmpty(t, dry.Plan.Tables)
	require.Equal(t, untouched, lakeObjects(t, e.lake), "a dry run writes nothing")
	var breachSaid bool
	for _, tp := range dry.Plan.Tables {
		if tp.Breach > 0 {
			breachSaid = true
			require.Contains(t, tp.Detail, "oml lake vacuum")
		}
	}
	require.True(t, breachSaid, "the plan says the breach out loud")

	res := e.repairAll(t)
	require.NotEmpty(t, res.Repaired)

	if greenBeforeDrain {
		requireChecksGreen(t, e) // before a drain: the repair alone made reconcile clean
	}
	e.drain(t) // the lake.repaired events' own bronze rows
	requireLakeEqualsJournal(t, e)
	archived := map[string]bool{}
	for _, rows := range archivedRows(t, e.lake, tables.Silver, "artifact_id", "version", "body") {
		for _, r := range rows {
			archived[fmt.Sprintf("%s/%d", r[0], r[1])] = true
		}
	}
	require.True(t, archived[breach], "the breach row is archived")
	forged := false
	for _, rows := range archivedRows(t, e.lake, tables.Bronze, "seq") {
		for _, r := range rows {
			forged = forged || r[0].(int64) == 90001
		}
	}
	require.True(t, forged, "the forged bronze row is archived")
	evs := repairEvents(t, e.pool)
	require.Len(t, evs[t0], 1)
	require.Len(t, evs[t1], 1)
	named := 0
	for _, ev := range evs {
		named += len(ev[0].Tables)
	}
	require.Equal(t, len(res.Repaired), named, "every repair commit is journalled once")

	e.requireNothingToRepair(t)
}

// TestRepair_MissingRowsOfATableBehindTheFrontier_PutBack: a tenant's
// bronze data files are lost, then only the other tenant writes and is
// drained, so the frontier passes the first table's txn version (a table
// no batch touches keeps its version). The lost rows are at or below that
// version, so no drain will ever apply them again: the repair must put
// them back, not leave them "pending" for a drain. (Found by the race
// test: with a drain before the repair, the rows stayed missing.)
func TestRepair_MissingRowsOfATableBehindTheFrontier_PutBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	e, t0, t1 := newRowsEnv(t, lake)
	bst := tableStore(t, e.lake, t0, tables.Bronze)
	snap, err := delta.Load(ctx, bst)
	require.NoError(t, err)
	require.NotEmpty(t, snap.Files())
	for _, f := range snap.Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		require.NoError(t, bst.Delete(ctx, p))
	}
	e.load(t, []uuid.UUID{t1}, 77)
	e.drain(t)
	after, err := delta.Load(ctx, bst)
	require.NoError(t, err)
	v, _ := after.TxnVersion(tables.AppID)
	require.Less(t, v, e.lastSeq(t), "the first tenant's bronze table is behind the frontier")

	res, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, res.Repaired)
	require.Zero(t, res.Remaining, "%+v", res.Plan)
	e.drain(t)
	requireLakeEqualsJournal(t, e)
	e.requireNoTableToRepair(t)
}

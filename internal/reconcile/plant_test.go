package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

func tableStore(t *testing.T, b *bundle, tn uuid.UUID, k tables.Kind) store.Store {
	t.Helper()
	st, err := tables.TableKey{Tenant: tn, Kind: k}.Store(b.lake)
	require.NoError(t, err)
	return st
}

type claimRef struct {
	artifact string
	version  int32
}

func refOf(r pq.Row) claimRef {
	return claimRef{r[tables.SilverArtifactID].(string), r[tables.SilverVersion].(int32)}
}

// TestReconcile_HealthyLakeHasNoFindings_ThenEachPlantedClassIsFound drains
// a real workload, checks that reconcile reports nothing, then plants one
// problem of each class and checks that each is found, with its claim or
// seq, and nothing else:
//
//   - tenant 0's silver table is rewritten by hand: one promoted claim's row
//     dropped (missing-in-lake), one row's ciphertext digest and bytes
//     changed (digest-mismatch), one row's state changed (state-mismatch),
//     one row written twice (duplicate-in-lake) and a held claim's body
//     written into it (unexpected-in-lake: the containment breach);
//   - an erased artifact's data key is put back (erased-key-present);
//   - tenant 1's bronze data files are deleted from the store while the
//     Delta log still lists them (missing-in-lake per file and per event);
//   - new claims are appended and not drained while a transaction holding
//     an xid stays open (stale-frontier naming that transaction; the
//     undrained rows are above the cutoff and are not reported missing).
func TestReconcile_HealthyLakeHasNoFindings_ThenEachPlantedClassIsFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 40, Seed: 31, RetractRatio: 0.6})
	require.Empty(t, b.drain(t))

	rep := b.reconcile(t, reconcile.Options{RunBytes: 4 << 10}) // tiny runs: the spill path is exercised
	requireClean(t, rep)
	require.Positive(t, rep.Stats.Claims)
	require.Positive(t, rep.Stats.Events)
	require.Positive(t, rep.Stats.LakeRows)
	require.Positive(t, rep.Stats.SortRuns, "the external sort spilled")
	require.Len(t, rep.Tenants, 3, "the provider tenant and two customer tenants")

	t0, t1 := b.Tenants[0], b.Tenants[1]

	// The plants on tenant 0's silver table.
	var missing, digest, state, dup claimRef
	var held claimRef
	var heldRow pq.Row
	rows, err := b.Pool.Query(ctx, `
SELECT c.artifact_id, c.version, c.workarea_id, c.writer, c.principal, c.provenance,
       encode(c.plaintext_digest, 'hex'), encode(c.ciphertext_digest, 'hex'), b.ciphertext, c.submitted_seq
  FROM oml.claims c JOIN oml.claim_bodies b USING (tenant_id, artifact_id, version)
 WHERE c.tenant_id = $1 AND c.promoted_seq IS NULL AND c.state = 'held' LIMIT 1`, t0)
	require.NoError(t, err)
	heldRow, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (pq.Row, error) {
		var a, wa, wr, pr, pv, pd, cd string
		var v int32
		var body []byte
		var sub int64
		if err := r.Scan(&a, &v, &wa, &wr, &pr, &pv, &pd, &cd, &body, &sub); err != nil {
			return nil, err
		}
		held = claimRef{a, v}
		return tables.SilverRow{ArtifactID: a, Version: v, TenantID: t0.String(), WorkareaID: wa, Writer: wr, Principal: pr, Provenance: pv,
			PlaintextDigest: pd, CiphertextDigest: cd, Body: body, State: "promoted", PromotedBy: "mallory",
			SubmittedSeq: sub, PromotedSeq: sub + 1, JournalSeq: sub + 1, OutboxSeq: 1, UpdatedAt: time.Now().UTC().Truncate(time.Microsecond)}.Row(), nil
	})
	require.NoError(t, err)
	require.Len(t, heldRow, len(tables.Silver.Schema().Fields))

	testkit.RewriteTable(t, tableStore(t, b, t0, tables.Silver), func(rs []pq.Row) []pq.Row {
		var promoted []int
		for i, r := range rs {
			if r[tables.SilverState] == "promoted" {
				promoted = append(promoted, i)
			}
		}
		require.GreaterOrEqual(t, len(promoted), 4)
		missing, digest, state, dup = refOf(rs[promoted[0]]), refOf(rs[promoted[1]]), refOf(rs[promoted[2]]), refOf(rs[promoted[3]])
		// digest: other ciphertext bytes and their (consistent) digest.
		r := rs[promoted[1]]
		body := append(append([]byte(nil), r[tables.SilverBody].([]byte)...), 0)
		sum := sha256.Sum256(body)
		r[tables.SilverBody], r[tables.SilverCiphertextDigest] = body, hex.EncodeToString(sum[:])
		rs[promoted[2]][tables.SilverState] = "demoted"
		out := append([]pq.Row(nil), rs[:promoted[0]]...)
		out = append(out, rs[promoted[0]+1:]...)
		out = append(out, append(pq.Row(nil), rs[promoted[3]]...), heldRow)
		return out
	})

	// An erased artifact keeps its data key.
	var erased string
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT artifact_id FROM oml.claims WHERE tenant_id = $1 AND state = 'erased' LIMIT 1`, t0).Scan(&erased))
	b.exec(t, `INSERT INTO oml.claim_keys (tenant_id, artifact_id, dek, created_at) VALUES ($1, $2, $3, now())`, t0, erased, make([]byte, 32))

	// Tenant 1's bronze data files vanish from the store.
	bst := tableStore(t, b, t1, tables.Bronze)
	bsnap, _ := testkit.ReadRows(t, bst)
	for _, f := range bsnap.Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		require.NoError(t, bst.Delete(ctx, p))
	}
	var t1Events int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, t1).Scan(&t1Events))

	// New work that is not drained, behind a transaction that holds an xid.
	b.load(t, workload.Config{Tenants: []uuid.UUID{t0}, Claims: 5, Seed: 32})
	blocker, err := b.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	var blockerPID int32
	var blockerXid string
	require.NoError(t, blocker.QueryRow(ctx, `SELECT pg_backend_pid(), pg_current_xact_id()::text`).Scan(&blockerPID, &blockerXid))

	rep = b.reconcile(t, reconcile.Options{StaleAfter: time.Nanosecond})
	got := byClass(rep)
	for _, f := range rep.Findings {
		if f.Table == string(tables.Bronze) {
			continue
		}
		t.Logf("%s %s %s %s v%d seq %d: %s", f.Class, f.TenantName, f.Table, f.ArtifactID, f.Version, f.Seq, f.Detail)
	}

	one := func(c reconcile.Class, want claimRef) reconcile.Finding {
		t.Helper()
		require.Len(t, got[c], 1, "%s: %v", c, got[c])
		f := got[c][0]
		require.Equal(t, t0, f.Tenant)
		require.Equal(t, want.artifact, f.ArtifactID)
		require.Equal(t, want.version, f.Version)
		require.Equal(t, string(tables.Silver), f.Table)
		return f
	}
	f := one(reconcile.DigestMismatch, digest)
	require.Contains(t, f.Detail, "ciphertext_digest")
	require.Contains(t, f.Detail, "body")
	f = one(reconcile.StateMismatch, state)
	require.Contains(t, f.Detail, "state: lake demoted, journal fold promoted")
	one(reconcile.DuplicateInLake, dup)
	f = one(reconcile.UnexpectedInLake, held)
	require.Contains(t, f.Detail, "containment breach")

	require.Len(t, got[reconcile.ErasedKeyPresent], 1)
	require.Equal(t, erased, got[reconcile.ErasedKeyPresent][0].ArtifactID)

	// missing-in-lake: the dropped silver row of tenant 0, and tenant 1's
	// bronze: one finding per deleted file plus one per journal event.
	var silverMissing, fileMissing, eventMissing int
	for _, f := range got[reconcile.MissingInLake] {
		switch {
		case f.Tenant == t0 && f.Table == string(tables.Silver):
			require.Equal(t, missing, claimRef{f.ArtifactID, f.Version})
			silverMissing++
		case f.Tenant == t1 && f.Evidence["file"] != "":
			fileMissing++
		case f.Tenant == t1 && f.Seq > 0:
			eventMissing++
		default:
			t.Fatalf("unexpected missing-in-lake finding %+v", f)
		}
	}
	require.Equal(t, 1, silverMissing)
	require.Equal(t, bsnap.NumFiles(), fileMissing)
	require.EqualValues(t, t1Events, eventMissing, "every journal event of tenant 1 is reported missing")

	require.Len(t, got[reconcile.StaleFrontier], 1)
	sf := got[reconcile.StaleFrontier][0]
	require.Equal(t, fmt.Sprint(blockerPID), sf.Evidence["blocker_pid"], sf.Detail)
	require.Equal(t, blockerXid, sf.Evidence["blocker_xid"])
	require.Contains(t, sf.Detail, "blocked by transaction")

	require.Empty(t, got[reconcile.DeadLettered])
	require.EqualValues(t, rep.Total(), int64(len(rep.Findings)), "nothing truncated")
}

// TestReconcile_TenantHeldForAForkedChain: a tenant whose chain lost its
// tail (a witnessed head beyond it) is not materialized by the lake writer,
// so its tables fall behind the frontier. Reconcile compares them at their
// own txn version (no missing-in-lake for rows the writer deliberately held)
// and says why they are behind (stale-frontier per held table); the other
// tenant is audited up to the frontier as usual.
func TestReconcile_TenantHeldForAForkedChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 33})
	require.Empty(t, b.drain(t))
	requireClean(t, b.reconcile(t, reconcile.Options{}))

	held := b.Tenants[1]
	heads, err := witness.Capture(ctx, b.Pool, &held, time.Now())
	require.NoError(t, err)
	h := heads[0]
	h.Seq += 5
	h.Hash = strings.Repeat("cd", 32)
	require.NoError(t, h.Sign(b.Key))
	created, err := witness.Publish(ctx, b.lake, h)
	require.NoError(t, err)
	require.True(t, created)

	b.load(t, workload.Config{Claims: 10, Seed: 34})
	require.Empty(t, b.drain(t))

	rep := b.reconcile(t, reconcile.Options{})
	got := byClass(rep)
	require.EqualValues(t, rep.Counts[reconcile.StaleFrontier], rep.Total(), "only the held tables are reported: %v", rep.Counts)
	require.NotEmpty(t, got[reconcile.StaleFrontier])
	for _, f := range got[reconcile.StaleFrontier] {
		require.Equal(t, held, f.Tenant)
		require.Regexp(t, `chain check found (tail-lost|fork)`, f.Detail)
	}
}

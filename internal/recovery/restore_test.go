package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testkit"
)

func restore(t *testing.T, f *failover, opts recovery.RestoreOptions) *recovery.RestoreResult {
	t.Helper()
	opts.Pool, opts.Lake, opts.By = f.promoted, f.lake, "test"
	if !opts.DryRun {
		opts.Signer = f.key
	}
	res, err := recovery.RestoreTail(context.Background(), opts)
	require.NoError(t, err)
	return res
}

func byTenant(res *recovery.RestoreResult) map[uuid.UUID]*recovery.TenantResult {
	out := map[uuid.UUID]*recovery.TenantResult{}
	for _, r := range res.Tenants {
		out[r.Tenant] = r
	}
	return out
}

// verifyAll runs chain verify on pool with the lake's witnesses and bronze
// heads as anchors, as `oml chain verify --lake` does.
func verifyAll(t *testing.T, f *failover) chainverify.Report {
	t.Helper()
	_, rep := testkit.VerifyChains(t, f.promoted, f.lake)
	return rep
}

// TestForkCheck_BronzeAheadOfJournalWithoutWitness_IsTailLost: no signed
// witness ever covered the lost tail (the writer had no key); bronze alone
// shows every chain that lost events, provider included.
func TestForkCheck_BronzeAheadOfJournalWithoutWitness_IsTailLost(t *testing.T) {
	t.Parallel()
	f := newFailover(t, false)
	fc, err := chainverify.ForkCheck(context.Background(), f.promoted, f.lake, nil)
	require.NoError(t, err)
	require.Empty(t, fc.Witnessed)
	lost := map[uuid.UUID]chainverify.Finding{}
	for _, fd := range fc.Findings {
		lost[fd.Tenant] = fd
	}
	// The tenant created in the lost provider tail is unknown to the
	// promoted database: the provider chain's loss is its finding.
	for _, id := range append([]uuid.UUID{journal.ProviderTenant}, f.tenants[:2]...) {
		fd, ok := lost[id]
		require.True(t, ok, "tenant %s lost its tail", id)
		require.Equal(t, chainverify.ReasonTailLost, fd.Reason)
		require.Equal(t, chainverify.AnchorBronze, fd.Evidence["anchor"])
	}
	// The old primary agrees with the lake.
	fc, err = chainverify.ForkCheck(context.Background(), f.old, f.lake, nil)
	require.NoError(t, err)
	require.Empty(t, fc.Findings)
}

// TestRestoreTail_PromotedCopyLostTail_JournalEqualsOldPrimary: the
// promoted copy lost a tail the lake drained past the newest witness. The
// dry run plans without writing; the restore makes the journal equal the
// old primary's, event for event, rebuilds the fold (CheckFold), and the
// fork check is clean. New writes then drain, verify is clean (witness
// and bronze anchors) and reconcile finds nothing. A second run has
// nothing to do.
func TestRestoreTail_PromotedCopyLostTail_JournalEqualsOldPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, true)
	before := chainOf(t, f.promoted)

	plan := restore(t, f, recovery.RestoreOptions{DryRun: true})
	require.Zero(t, plan.Refused(), "%+v", plan.Tenants)
	require.Equal(t, before, chainOf(t, f.promoted), "a dry run writes nothing")
	pt := byTenant(plan)
	require.Equal(t, recovery.StatusRestorable, pt[journal.ProviderTenant].Status)
	require.Contains(t, pt, f.tenants[2], "the tenant created in the lost provider tail is planned too")

	res := restore(t, f, recovery.RestoreOptions{})
	require.Zero(t, res.Refused(), "%+v", res.Tenants)
	for _, id := range append([]uuid.UUID{journal.ProviderTenant}, f.tenants...) {
		r := byTenant(res)[id]
		require.Equal(t, recovery.StatusRestored, r.Status, "tenant %s: %s", id, r.Problem)
		require.Positive(t, r.OutboxRows)
	}
	requireJournalEqualsOld(t, f, nil)
	requireFoldsAgree(t, f.promoted, f.tenants...)
	// Claims submitted in the lost tail and still held came back body_lost,
	// without their body (never in the lake), and are listed.
	bodyLost := 0
	for _, r := range res.Tenants {
		for _, c := range r.BodyLost {
			bodyLost++
			var state string
			var hasBody bool
			require.NoError(t, f.promoted.QueryRow(ctx, `SELECT state, EXISTS (SELECT 1 FROM oml.claim_bodies b
WHERE b.tenant_id = c.tenant_id AND b.artifact_id = c.artifact_id AND b.version = c.version)
FROM oml.claims c WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`, r.Tenant, c.ArtifactID, c.Version).Scan(&state, &hasBody))
			require.Equal(t, journal.StateBodyLost, state)
			require.False(t, hasBody)
		}
		var payload []byte
		require.NoError(t, f.promoted.QueryRow(ctx, `SELECT payload FROM oml.journal WHERE tenant_id = $1 AND seq = $2 AND event_type = 'chain.tail_restored'`,
			r.Tenant, r.RestoredSeq).Scan(&payload))
		p, err := journal.Decode(journal.TypeChainTailRestored, payload)
		require.NoError(t, err)
		require.Equal(t, r.ToSeq, p.(journal.ChainTailRestored).ToSeq)
		require.Len(t, p.(journal.ChainTailRestored).BodyLost, len(r.BodyLost))
	}
	require.Positive(t, bodyLost, "the workload left held claims in the lost tail")
	requireMigration007Upgrades(t, f.promoted, f.tenants)
	fc, err := chainverify.ForkCheck(ctx, f.promoted, f.lake, nil)
	require.NoError(t, err)
	require.Empty(t, fc.Findings)
	require.GreaterOrEqual(t, res.OutboxSeq, lastSeq(t, f.old), "the outbox sequence is past every table's txn version")

	again := restore(t, f, recovery.RestoreOptions{})
	for _, r := range again.Tenants {
		require.Equal(t, recovery.StatusIntact, r.Status, "tenant %s", r.Tenant)
	}

	// New writes on the promoted database append and drain.
	load(t, f.promoted, f.key, f.tenants, 4)
	drainAll(t, f.promoted, f.lake, f.key)
	rep := verifyAll(t, f)
	require.Empty(t, rep.Findings)
	requireFoldsAgree(t, f.promoted, f.tenants...)
	requireReconcileClean(t, f.promoted, f.lake)
}

// TestRestoreTail_CrashInTheMiddle_ReRunGivesTheSameEndState: the restore
// fails inside a tenant's transaction — after the journal rows, after the
// fold — of the first chain (the provider), and then of the second chain
// after the provider's restore committed. Nothing of a crashed chain's
// restore stays; a re-run restores everything exactly.
func TestRestoreTail_CrashInTheMiddle_ReRunGivesTheSameEndState(t *testing.T) {
	t.Parallel()
	f := newFailover(t, true)
	before := chainOf(t, f.promoted)
	for _, c := range []struct {
		point string
		nth   int
	}{{"after-journal", 1}, {"after-fold", 1}, {"after-fold", 2}} {
		crash := errors.New("crash at " + c.point)
		n := 0
		opts := recovery.WithCrashAt(recovery.RestoreOptions{Pool: f.promoted, Lake: f.lake, Signer: f.key, By: "test"},
			func(p string) error {
				if p == c.point {
					if n++; n == c.nth {
						return crash
					}
				}
				return nil
			})
		_, err := recovery.RestoreTail(context.Background(), opts)
		require.ErrorIs(t, err, crash)
		if c.nth == 1 {
			require.Equal(t, before, chainOf(t, f.promoted), "the crashed chain's restore left nothing behind")
		} else {
			// The provider chain was restored and committed; the crashed
			// tenant's chain is as it was.
			now := chainOf(t, f.promoted)
			require.Greater(t, len(now), len(before))
			for e, h := range now {
				if _, was := before[e]; !was {
					require.Equal(t, journal.ProviderTenant, e.tenant, "only the provider chain grew: %s", h)
				}
			}
		}
	}
	res := restore(t, f, recovery.RestoreOptions{})
	require.Zero(t, res.Refused())
	require.Equal(t, recovery.StatusIntact, byTenant(res)[journal.ProviderTenant].Status, "restored before the crash")
	requireJournalEqualsOld(t, f, nil)
	requireFoldsAgree(t, f.promoted, f.tenants...)
	drainAll(t, f.promoted, f.lake, f.key)
	requireReconcileClean(t, f.promoted, f.lake)
}

// rewriteBronze replaces every live file of tenant's bronze table with one
// file holding edit(rows), as a hand-made change would.
func rewriteBronze(t *testing.T, f *failover, tn uuid.UUID, edit func([]pq.Row) []pq.Row) {
	t.Helper()
	st, err := bronze.Key(tn).Store(f.lake)
	require.NoError(t, err)
	testkit.RewriteTable(t, st, edit)
}

// TestRestoreTail_TamperedBronzeRow_IsRefusedAndNamed: one lost event's
// bronze row has its payload edited (a digest changed); the tenant's
// restore is refused naming that row, nothing of it is inserted, and the
// other chains are restored.
func TestRestoreTail_TamperedBronzeRow_IsRefusedAndNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, true)
	victim := f.tenants[0]
	var head int64
	require.NoError(t, f.promoted.QueryRow(ctx, `SELECT max(seq) FROM oml.journal WHERE tenant_id = $1`, victim).Scan(&head))
	bad := head + 2
	rewriteBronze(t, f, victim, func(rows []pq.Row) []pq.Row {
		for _, r := range rows {
			if tables.DecodeBronze(r).Seq == bad {
				sig := append([]byte(nil), r[tables.BronzeSignature].([]byte)...)
				sig[5] ^= 0x40
				r[tables.BronzeSignature] = sig
			}
		}
		return rows
	})
	res := restore(t, f, recovery.RestoreOptions{})
	v := byTenant(res)[victim]
	require.Equal(t, recovery.StatusRefused, v.Status)
	require.True(t, v.Tampered)
	require.Contains(t, v.Problem, fmt.Sprintf("seq %d", bad))
	require.Contains(t, v.Problem, "signature")
	require.Equal(t, 1, res.Refused())
	var now int64
	require.NoError(t, f.promoted.QueryRow(ctx, `SELECT max(seq) FROM oml.journal WHERE tenant_id = $1`, victim).Scan(&now))
	require.Equal(t, head, now, "nothing of the refused tenant was inserted")
	require.Equal(t, recovery.StatusRestored, byTenant(res)[f.tenants[1]].Status)
}

// requireMigration007Upgrades: a restore journalled before migration 007
// left the claims its chain.tail_restored names held. Put back in that
// state, migration 007's UPDATE moves them to body_lost exactly as the
// fold now does (CheckFold agrees again).
func requireMigration007Upgrades(t *testing.T, pool *pgxpool.Pool, tenants []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var sql string
	for _, m := range schema.All() {
		if m.Version == 7 {
			sql = m.SQL[strings.Index(m.SQL, "UPDATE oml.claims"):]
		}
	}
	require.NotEmpty(t, sql)
	want := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT tenant_id::text || '/' || artifact_id || '/' || version, state || ' ' || last_seq || ' ' || updated_at FROM oml.claims WHERE state = 'body_lost'`)
	require.NoError(t, err)
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		want[k] = v
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, want)
	// As a pre-007 restore left them: held, last changed at submission.
	_, err = pool.Exec(ctx, `UPDATE oml.claims SET state = 'held', last_seq = submitted_seq, updated_at = submitted_at WHERE state = 'body_lost'`)
	require.NoError(t, err)
	differs := 0
	for _, tn := range tenants {
		if journal.CheckFold(ctx, pool, tn) != nil {
			differs++
		}
	}
	require.Positive(t, differs, "the fold says body_lost where the stored state says held")
	_, err = pool.Exec(ctx, sql)
	require.NoError(t, err)
	got := map[string]string{}
	rows, err = pool.Query(ctx, `SELECT tenant_id::text || '/' || artifact_id || '/' || version, state || ' ' || last_seq || ' ' || updated_at FROM oml.claims WHERE state = 'body_lost'`)
	require.NoError(t, err)
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		got[k] = v
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got)
	requireFoldsAgree(t, pool, tenants...)
}

package recovery_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// TestRestoreTail_PromotedStandbyLostTail_JournalEqualsOldPrimary: a real
// primary and a real streaming standby (pg_basebackup). The standby stops
// receiving; the primary writes and the lake writer drains past the newest
// witness (no key: nothing witnessed the tail); the primary crashes and the
// standby is promoted. restore-tail makes the promoted journal equal the
// old primary's (every tenant, seq, hash); new writes drain; verify and
// reconcile are clean.
func TestRestoreTail_PromotedStandbyLostTail_JournalEqualsOldPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	pool := testdb.OpenPool(t, primary.CreateDatabase(t, "oml", schema.Migrate))
	key, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, key)
	require.NoError(t, err)
	var tenants []uuid.UUID
	for _, name := range []string{"acme", "globex"} {
		tn, _, err := tenant.Create(ctx, pool, key, name)
		require.NoError(t, err)
		tenants = append(tenants, tn.ID)
	}
	lake := testkit.FileLake(t)
	load(t, pool, key, tenants, 11)
	drainAll(t, pool, lake, key)
	standby := testdb.StartStandby(t, primary)
	load(t, pool, key, tenants, 12) // streamed: the standby keeps it

	var old map[event]string
	promoted := testdb.LoseTail(t, primary, standby, func() {
		load(t, pool, key, tenants, 13) // the lost tail
		drainAll(t, pool, lake, nil)
		old = chainOf(t, pool)
		pool.Close()
	})
	ppool := testdb.OpenPool(t, promoted.URL("oml"))
	f := &failover{promoted: ppool, key: key, lake: lake, tenants: tenants}

	fc, err := chainverify.ForkCheck(ctx, ppool, lake, nil)
	require.NoError(t, err)
	require.NotEmpty(t, fc.Findings, "bronze shows the lost tail")

	res := restore(t, f, recovery.RestoreOptions{})
	require.Zero(t, res.Refused(), "%+v", res.Tenants)
	now := chainOf(t, ppool)
	for e, h := range old {
		require.Equal(t, h, now[e], "tenant %s seq %d", e.tenant, e.seq)
	}
	for e, h := range now {
		if _, ok := old[e]; !ok {
			require.Contains(t, h, string(journal.TypeChainTailRestored))
		}
	}
	requireFoldsAgree(t, ppool, tenants...)

	requireBodyLost(t, ppool, key, res)

	load(t, ppool, key, tenants, 14)
	drainAll(t, ppool, lake, key)
	rep := verifyAll(t, f)
	require.Empty(t, rep.Findings)
	requireReconcileClean(t, ppool, lake)
}

// requireBodyLost: every claim the restore lists as body_lost is in state
// body_lost without a body, and named by its chain.tail_restored; a
// promotion of one is refused with a sentence naming the state and the way
// forward, and nothing of it is written; a demotion of one is accepted
// (retired like a held claim, no silver row to retract).
func requireBodyLost(t *testing.T, pool *pgxpool.Pool, key *keys.Key, res *recovery.RestoreResult) {
	t.Helper()
	ctx := context.Background()
	var lost []journal.ClaimRef
	var lostTenant uuid.UUID
	for _, r := range res.Tenants {
		for _, c := range r.BodyLost {
			var state string
			var hasBody bool
			require.NoError(t, pool.QueryRow(ctx, `SELECT state, EXISTS (SELECT 1 FROM oml.claim_bodies b
WHERE b.tenant_id = c.tenant_id AND b.artifact_id = c.artifact_id AND b.version = c.version)
FROM oml.claims c WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`, r.Tenant, c.ArtifactID, c.Version).Scan(&state, &hasBody))
			require.Equal(t, journal.StateBodyLost, state, "claim %s v%d", c.ArtifactID, c.Version)
			require.False(t, hasBody)
		}
		if len(r.BodyLost) > 0 && lost == nil {
			lost, lostTenant = r.BodyLost, r.Tenant
		}
	}
	require.NotEmpty(t, lost, "the workload left held claims in the lost tail")
	n, err := journal.CountBodyLost(ctx, pool)
	require.NoError(t, err)
	total := 0
	for _, r := range res.Tenants {
		total += len(r.BodyLost)
	}
	require.Equal(t, int64(total), n)

	before := chainOf(t, pool)
	ev, err := journal.New(journal.ClaimPromoted{ArtifactID: lost[0].ArtifactID, Version: lost[0].Version, By: "reviewer-after-failover"})
	require.NoError(t, err)
	_, err = chain.Append(ctx, pool, key, lostTenant, ev)
	require.ErrorIs(t, err, journal.ErrRejected)
	require.ErrorContains(t, err, "is body_lost: its held body was lost in a failover")
	require.ErrorContains(t, err, "submit its content again as a new version")
	require.Equal(t, before, chainOf(t, pool), "a refused promotion writes nothing")

	if len(lost) > 1 {
		ev, err = journal.New(journal.ClaimDemoted{ArtifactID: lost[1].ArtifactID, Version: lost[1].Version, By: "oncall", Reason: "body lost in the failover"})
		require.NoError(t, err)
		_, err = chain.Append(ctx, pool, key, lostTenant, ev)
		require.NoError(t, err)
		var state string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM oml.claims WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
			lostTenant, lost[1].ArtifactID, lost[1].Version).Scan(&state))
		require.Equal(t, journal.StateDemoted, state)
	}
	requireFoldsAgree(t, pool, lostTenant)
}

// TestRestoreTail_PromotedStandbyLostTailWithReenqueue_RefusedNamingEvent:
// a real standby; a poison row was dead-lettered (the standby holds that),
// then, in the lost tail, the dead letter was re-enqueued and the copy
// drained. restore-tail cannot put the copy back as the lost primary had
// it: the tenant is refused at plan time (a dry run shows it), naming the
// deadletter.reenqueued event, its dead letter and the way forward
// (accept-fork, repair); the provider chain is restored, the tenant's chain
// is left untouched, and accept-fork then takes the tenant (it is no longer
// restorable).
func TestRestoreTail_PromotedStandbyLostTailWithReenqueue_RefusedNamingEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	pool := testdb.OpenPool(t, primary.CreateDatabase(t, "oml", schema.Migrate))
	key, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, key)
	require.NoError(t, err)
	tn, _, err := tenant.Create(ctx, pool, key, "acme")
	require.NoError(t, err)
	tenants := []uuid.UUID{tn.ID}
	lake := testkit.FileLake(t)
	wl, err := workload.Run(ctx, pool, key, workload.Config{Tenants: tenants, Claims: 8, Seed: 21, PromoteRatio: 0.8, Poison: 1})
	require.NoError(t, err)
	require.Len(t, wl.Poison, 1)
	drainAll(t, pool, lake, key)
	letters, err := deadletter.List(ctx, pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	standby := testdb.StartStandby(t, primary)

	var reenqueuedSeq int64
	promoted := testdb.LoseTail(t, primary, standby, func() {
		// The cause is repaired (the held body put back), then re-enqueued.
		if p := wl.Poison[0]; p.Body != nil {
			_, err := pool.Exec(ctx, `INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, artifact_id, version) DO UPDATE SET ciphertext = EXCLUDED.ciphertext`, p.Tenant, p.ArtifactID, p.Version, p.Body)
			require.NoError(t, err)
		}
		res, err := deadletter.Reenqueue(ctx, pool, key, []int64{letters[0].ID}, deadletter.Options{By: "oncall", Reason: "fixed"})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.NoError(t, pool.QueryRow(ctx, `SELECT seq FROM oml.journal WHERE tenant_id = $1 AND event_type = 'deadletter.reenqueued'`, letters[0].TenantID).Scan(&reenqueuedSeq))
		load(t, pool, key, tenants, 22)
		drainAll(t, pool, lake, nil)
		pool.Close()
	})
	ppool := testdb.OpenPool(t, promoted.URL("oml"))
	f := &failover{promoted: ppool, key: key, lake: lake, tenants: tenants}
	before := chainOf(t, ppool)

	plan := restore(t, f, recovery.RestoreOptions{DryRun: true})
	r := byTenant(plan)[letters[0].TenantID]
	require.NotNil(t, r)
	require.Equal(t, recovery.StatusRefused, r.Status)
	require.Contains(t, r.Problem, fmt.Sprintf("deadletter.reenqueued at seq %d of dead letter %d (outbox row %d)", reenqueuedSeq, letters[0].ID, letters[0].OutboxSeq))
	require.Contains(t, r.Problem, "oml chain accept-fork --tenant "+letters[0].TenantID.String())
	require.Contains(t, r.Problem, "oml lake repair")

	res := restore(t, f, recovery.RestoreOptions{})
	require.Equal(t, recovery.StatusRefused, byTenant(res)[letters[0].TenantID].Status)
	after := chainOf(t, ppool)
	for e, h := range before {
		require.Equal(t, h, after[e])
	}
	for e := range after {
		if _, ok := before[e]; !ok {
			require.NotEqual(t, letters[0].TenantID, e.tenant, "nothing was written on the refused chain")
		}
	}

	_, err = recovery.AcceptFork(ctx, recovery.AcceptOptions{Pool: ppool, Lake: lake, Signer: key, Tenant: letters[0].TenantID, Reason: "reenqueue in the lost tail", By: "test"})
	require.NoError(t, err)
}

package recovery_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
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
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
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

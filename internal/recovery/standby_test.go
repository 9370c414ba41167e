package recovery_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

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

	load(t, ppool, key, tenants, 14)
	drainAll(t, ppool, lake, key)
	rep := verifyAll(t, f)
	require.Empty(t, rep.Findings)
	requireReconcileClean(t, ppool, lake)
}

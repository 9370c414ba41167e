package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

func accept(t *testing.T, f *failover, id uuid.UUID, dry bool) (*recovery.AcceptResult, error) {
	t.Helper()
	opts := recovery.AcceptOptions{Pool: f.promoted, Lake: f.lake, Tenant: id, Reason: "failover to the async standby", By: "test", DryRun: dry}
	if !dry {
		opts.Signer = f.key
	}
	return recovery.AcceptFork(context.Background(), opts)
}

// TestAcceptFork_PromotedWroteOverLostTail_VerifyReportsAccepted: after
// the promotion, the application wrote on the lost tail of one tenant and
// created a tenant (so the provider chain forked too). Accepting a tail
// restore-tail could bring back is refused; accepting the two forks
// journals chain.fork_accepted on the provider chain naming the lost
// witnessed and bronze heads; the fork check and verify then list them as
// accepted and fail only on the restorable tenant; the witness publisher
// may sign the new heads; a re-run has nothing more to accept.
func TestAcceptFork_PromotedWroteOverLostTail_VerifyReportsAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, true)
	// late was created in the lost provider tail: with the provider's fork
	// accepted, its own lost chain is accepted too.
	forked, restorable, late := f.tenants[0], f.tenants[1], f.tenants[2]
	load(t, f.promoted, f.key, []uuid.UUID{forked}, 5)
	_, _, err := tenant.Create(ctx, f.promoted, f.key, "fresh")
	require.NoError(t, err)

	fc, err := chainverify.ForkCheck(ctx, f.promoted, f.lake, nil)
	require.NoError(t, err)
	for _, id := range []uuid.UUID{journal.ProviderTenant, forked, restorable} {
		_, bad := fc.Forked(id)
		require.True(t, bad, "tenant %s", id)
	}

	_, err = accept(t, f, restorable, false)
	require.ErrorIs(t, err, recovery.ErrRestorable)

	dry, err := accept(t, f, forked, true)
	require.NoError(t, err)
	require.Zero(t, dry.ProviderSeq)
	var accepted []*recovery.AcceptResult
	for _, id := range []uuid.UUID{journal.ProviderTenant, forked, late} {
		res, err := accept(t, f, id, false)
		require.NoError(t, err)
		require.Positive(t, res.ProviderSeq)
		require.NotEmpty(t, res.Lost)
		if id != late {
			require.GreaterOrEqual(t, res.SharedSeq, int64(1))
		}
		require.Less(t, res.SharedSeq, res.Lost[0].Seq)
		accepted = append(accepted, res)
	}
	sources := map[string]bool{}
	for _, l := range accepted[1].Lost {
		sources[l.Source] = true
	}
	require.True(t, sources[chainverify.AnchorWitness] && sources[chainverify.AnchorBronze], "both lost heads are named: %+v", accepted[1].Lost)

	fc, err = chainverify.ForkCheck(ctx, f.promoted, f.lake, nil)
	require.NoError(t, err)
	require.Len(t, fc.Findings, 1, "%+v", fc.Findings)
	require.Equal(t, restorable, fc.Findings[0].Tenant)
	acceptedTenants := map[uuid.UUID]bool{}
	for _, a := range fc.Accepted {
		acceptedTenants[a.Finding.Tenant] = true
	}
	require.True(t, acceptedTenants[forked] && acceptedTenants[journal.ProviderTenant])

	rep := verifyAll(t, f)
	require.Len(t, rep.Findings, 1, "%+v", rep.Findings)
	require.Equal(t, restorable, rep.Findings[0].Tenant)
	accTenants := map[uuid.UUID]bool{}
	for _, a := range rep.Accepted {
		accTenants[a.Tenant] = true
	}
	require.True(t, accTenants[forked], "verify lists the accepted fork: %+v", rep.Accepted)

	// The new head extends everything not accepted as lost: it may be
	// witnessed now.
	trusted, err := chainverify.IssuedKeys(ctx, f.promoted)
	require.NoError(t, err)
	acc, err := chainverify.ReadAcceptances(ctx, f.promoted)
	require.NoError(t, err)
	heads, err := witness.Capture(ctx, f.promoted, &forked, time.Now())
	require.NoError(t, err)
	require.NoError(t, heads[0].Sign(f.key))
	require.NoError(t, chainverify.CheckWitnessExtends(ctx, f.promoted, f.lake, heads[0], trusted, acc))
	// Without the acceptance it would not.
	err = chainverify.CheckWitnessExtends(ctx, f.promoted, f.lake, heads[0], trusted, chainverify.Acceptances{})
	require.ErrorIs(t, err, witness.ErrNotExtending)

	again, err := accept(t, f, forked, false)
	require.NoError(t, err)
	require.True(t, again.AlreadyAccepted)
	require.Zero(t, again.ProviderSeq)
	requireFoldsAgree(t, f.promoted)
}

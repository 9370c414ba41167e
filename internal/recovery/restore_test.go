package recovery_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/recovery"
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
	ctx := context.Background()
	fc, err := chainverify.ForkCheck(ctx, f.promoted, f.lake, nil)
	require.NoError(t, err)
	acc, err := chainverify.ReadAcceptances(ctx, f.promoted)
	require.NoError(t, err)
	rep, err := chainverify.VerifyDB(ctx, f.promoted, chainverify.DBOptions{
		Full: true,
		Witnessed: func(id uuid.UUID) (chainverify.Head, bool) {
			w, ok := fc.Witnessed[id]
			if !ok {
				return chainverify.Head{}, false
			}
			return chainverify.Head{Seq: w.Seq, Hash: w.HashBytes()}, true
		},
		Bronze: func(id uuid.UUID) (chainverify.Head, bool) {
			b, ok := fc.Bronze[id]
			return chainverify.Head{Seq: b.Seq, Hash: b.Hash}, ok
		},
		Accepted: func(id uuid.UUID, a chainverify.Head) bool { _, ok := acc.Covers(id, a); return ok },
	})
	require.NoError(t, err)
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
// of the first tenant with a tail (the provider) fails inside its
// transaction, after the journal rows and after the fold; nothing of it
// stays, and a re-run restores everything exactly.
func TestRestoreTail_CrashInTheMiddle_ReRunGivesTheSameEndState(t *testing.T) {
	t.Parallel()
	f := newFailover(t, true)
	before := chainOf(t, f.promoted)
	for _, point := range []string{"after-journal", "after-fold"} {
		crash := errors.New("crash at " + point)
		recovery.SetTestHook(t, func(p string) error {
			if p == point {
				return crash
			}
			return nil
		})
		_, err := recovery.RestoreTail(context.Background(), recovery.RestoreOptions{
			Pool: f.promoted, Lake: f.lake, Signer: f.key, By: "test"})
		require.ErrorIs(t, err, crash)
		require.Equal(t, before, chainOf(t, f.promoted), "the crashed tenant's restore left nothing behind")
		recovery.SetTestHook(t, nil)
	}
	res := restore(t, f, recovery.RestoreOptions{})
	require.Zero(t, res.Refused())
	requireJournalEqualsOld(t, f, nil)
	requireFoldsAgree(t, f.promoted, f.tenants...)
	drainAll(t, f.promoted, f.lake, f.key)
	requireReconcileClean(t, f.promoted, f.lake)
}

package reconcile_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/workload"
)

// TestAbandonStory_HeldBodyGoneForGood_AcceptedGapAndDoctorGreen: a poison
// row whose held body is deleted and never comes back is dead-lettered;
// reconcile fails on it; once it is abandoned (journalled), reconcile is OK
// and lists the row as an accepted gap, doctor's dead-letters check is
// green, re-enqueue is refused, and every chain verifies.
func TestAbandonStory_HeldBodyGoneForGood_AcceptedGapAndDoctorGreen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	res := b.load(t, workload.Config{Claims: 20, Seed: 5, Poison: 2})
	require.Len(t, res.Poison, 2)
	dead := b.drain(t)
	require.Len(t, dead, 2)

	rep := b.reconcile(t, reconcile.Options{})
	require.False(t, rep.OK)
	require.EqualValues(t, 2, rep.Counts[reconcile.DeadLettered])
	require.Empty(t, rep.Accepted)

	open, err := deadletter.List(ctx, b.Pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Len(t, open, 2)
	ids := []int64{open[0].ID, open[1].ID}
	ab, err := deadletter.Abandon(ctx, b.Pool, b.Key, ids, deadletter.AbandonOptions{By: "oncall", Reason: "no backup holds these bodies"})
	require.NoError(t, err)
	for _, r := range ab {
		require.Equal(t, deadletter.OutcomeAbandoned, r.Outcome, "%+v", r)
	}

	rep = b.reconcile(t, reconcile.Options{})
	require.True(t, rep.OK, "an abandoned row is an accepted gap, not a finding: %+v", rep.Findings)
	require.Zero(t, rep.Total())
	require.Len(t, rep.Accepted, 2)
	for _, f := range rep.Accepted {
		require.Equal(t, reconcile.AcceptedGap, f.Class)
		require.Contains(t, f.Detail, "was abandoned by oncall")
		require.Contains(t, f.Detail, "no backup holds these bodies")
	}

	d := doctor.Run(ctx, doctor.Options{
		DB:   func(context.Context) (*pgxpool.Pool, error) { return b.Pool, nil },
		Lake: func(context.Context) (store.Store, error) { return b.lake, nil },
		Deep: true,
	})
	dl, ok := d.Check(doctor.IDDeadLetters)
	require.True(t, ok)
	require.Equal(t, doctor.StatusOK, dl.Status, dl.Summary)
	rc, ok := d.Check(doctor.IDReconcile)
	require.True(t, ok)
	require.Equal(t, doctor.StatusOK, rc.Status, rc.Summary)
	require.EqualValues(t, 2, rc.Data["accepted_gaps"])

	rr, err := deadletter.Reenqueue(ctx, b.Pool, b.Key, ids[:1], deadletter.Options{By: "oncall"})
	require.NoError(t, err)
	require.Equal(t, deadletter.OutcomeRefusedAbandoned, rr[0].Outcome)

	v, err := chainverify.VerifyDB(ctx, b.Pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, v.Findings)
}

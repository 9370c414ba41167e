package reconcile_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/workload"
)

// TestRepairStory_PoisonOfEachKind_DeadLetteredRepairedReenqueuedDrained is
// the whole repair loop on a real database and a real lake (file store):
//
//  1. a workload with one poison row of each kind (held body changed, held
//     body deleted, retract payload damaged) is drained: all three are
//     dead-lettered, and reconcile reports exactly three dead-lettered
//     findings (the rows they explain are not reported again);
//  2. deadletter.List shows them with their error and attempts;
//  3. the causes are repaired (the bodies restored from what the workload
//     kept; the damaged payload needs nothing: re-enqueue re-derives it from
//     the journal), every dead letter is re-enqueued, and a second
//     re-enqueue is a no-op that says so;
//  4. a second drain applies them: the lake is complete, reconcile finds
//     nothing, and every chain verifies with the materialize.skipped and
//     deadletter.reenqueued events in it.
func TestRepairStory_PoisonOfEachKind_DeadLetteredRepairedReenqueuedDrained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	res := b.load(t, workload.Config{Claims: 30, Seed: 21, Poison: 3, RetractRatio: 0.5})
	require.Len(t, res.Poison, 3)
	var planted []int64
	kinds := map[string]workload.Poison{}
	for _, p := range res.Poison {
		planted = append(planted, p.OutboxSeq)
		kinds[p.Kind] = p
	}
	require.Len(t, kinds, 3, "one poison row of each kind")

	dead := b.drain(t)
	sort.Slice(dead, func(i, j int) bool { return dead[i] < dead[j] })
	sort.Slice(planted, func(i, j int) bool { return planted[i] < planted[j] })
	require.Equal(t, planted, dead)

	// Reconcile: the lake is knowingly incomplete, and says so only as
	// dead-lettered findings.
	rep := b.reconcile(t, reconcile.Options{})
	require.False(t, rep.OK)
	require.EqualValues(t, 3, rep.Counts[reconcile.DeadLettered], "%v", rep.Counts)
	require.EqualValues(t, 3, rep.Total(), "only the dead letters: %v", rep.Counts)
	for _, f := range rep.Findings {
		require.Contains(t, planted, f.OutboxSeq)
		require.NotEmpty(t, f.Evidence["dead_letter_id"])
	}

	// The list shows them.
	open, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Len(t, open, 3)
	var ids []int64
	for _, l := range open {
		require.Contains(t, planted, l.OutboxSeq)
		require.Equal(t, 2, l.Attempts)
		require.NotEmpty(t, l.Error)
		require.False(t, l.Reenqueued)
		ids = append(ids, l.ID)
		d, err := deadletter.Show(ctx, b.pool, l.ID)
		require.NoError(t, err)
		require.NotNil(t, d.Skipped)
		require.Equal(t, "materialize.skipped", d.Skipped.EventType)
		require.NotNil(t, d.Source)
		require.NotNil(t, d.ImpliedPayload)
		if l.OutboxSeq == kinds[workload.PoisonBadPayload].OutboxSeq {
			require.False(t, d.PayloadMatches, "the damaged payload differs from what the journal implies")
		} else {
			require.True(t, d.PayloadMatches)
			require.NotNil(t, d.BodyPresent)
		}
	}

	// Repair the causes: restore the held bodies.
	dm := kinds[workload.PoisonDigestMismatch]
	b.exec(t, `UPDATE oml.claim_bodies SET ciphertext = $4 WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
		dm.Tenant, dm.ArtifactID, dm.Version, dm.Body)
	mb := kinds[workload.PoisonMissingBody]
	b.exec(t, `INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext) VALUES ($1, $2, $3, $4)`,
		mb.Tenant, mb.ArtifactID, mb.Version, mb.Body)

	results, err := deadletter.Reenqueue(ctx, b.pool, b.key, ids, deadletter.Options{By: "oncall", Reason: "restored the held bodies"})
	require.NoError(t, err)
	require.Len(t, results, 3)
	for _, r := range results {
		require.Equal(t, deadletter.OutcomeReenqueued, r.Outcome, r.Error)
		require.Greater(t, r.NewOutboxSeq, r.OutboxSeq)
		require.Positive(t, r.JournalSeq)
		require.Equal(t, r.OutboxSeq == kinds[workload.PoisonBadPayload].OutboxSeq, r.PayloadRederived)
	}
	// The re-enqueued copy of the damaged retract carries the original payload.
	var same bool
	bp := kinds[workload.PoisonBadPayload]
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT o.payload = $2::jsonb FROM oml.dead_letter d JOIN oml.outbox o ON o.seq = d.new_outbox_seq WHERE d.outbox_seq = $1`,
		bp.OutboxSeq, string(bp.Payload)).Scan(&same))
	require.True(t, same, "the copy carries the payload the journal implies, which is the original one")

	// Twice does nothing the second time, and says so.
	again, err := deadletter.Reenqueue(ctx, b.pool, b.key, ids, deadletter.Options{By: "oncall"})
	require.NoError(t, err)
	for i, r := range again {
		require.Equal(t, deadletter.OutcomeAlreadyReenqueued, r.Outcome)
		require.Equal(t, results[i].NewOutboxSeq, r.NewOutboxSeq)
		require.Equal(t, results[i].JournalSeq, r.JournalSeq)
		require.Equal(t, "oncall", r.By)
	}
	var copies int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE event_type = 'deadletter.reenqueued'`).Scan(&copies))
	require.Equal(t, 3, copies, "the second re-enqueue journalled nothing")

	// Until the drain, the re-enqueued rows are pending, not findings.
	rep = b.reconcile(t, reconcile.Options{})
	requireClean(t, rep)

	require.Empty(t, b.drain(t), "the repaired rows apply")
	rep = b.reconcile(t, reconcile.Options{})
	requireClean(t, rep)
	open, err = deadletter.List(ctx, b.pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, open)
	all, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{All: true})
	require.NoError(t, err)
	require.Len(t, all, 3)

	vr, err := chainverify.VerifyDB(ctx, b.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, vr.Findings, "every chain verifies")
	var skipped, reenq int
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE event_type = 'materialize.skipped'), count(*) FILTER (WHERE event_type = 'deadletter.reenqueued')
FROM oml.journal`).Scan(&skipped, &reenq))
	require.Equal(t, 3, skipped)
	require.Equal(t, 3, reenq)
}

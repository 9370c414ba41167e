package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
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
	open, err := deadletter.List(ctx, b.Pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Len(t, open, 3)
	var ids []int64
	for _, l := range open {
		require.Contains(t, planted, l.OutboxSeq)
		require.Equal(t, 2, l.Attempts)
		require.NotEmpty(t, l.Error)
		require.False(t, l.Reenqueued)
		ids = append(ids, l.ID)
		d, err := deadletter.Show(ctx, b.Pool, l.ID)
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

	results, err := deadletter.Reenqueue(ctx, b.Pool, b.Key, ids, deadletter.Options{By: "oncall", Reason: "restored the held bodies"})
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
	require.NoError(t, b.Pool.QueryRow(ctx, `
SELECT o.payload = $2::jsonb FROM oml.dead_letter d JOIN oml.outbox o ON o.seq = d.new_outbox_seq WHERE d.outbox_seq = $1`,
		bp.OutboxSeq, string(bp.Payload)).Scan(&same))
	require.True(t, same, "the copy carries the payload the journal implies, which is the original one")

	// Twice does nothing the second time, and says so.
	again, err := deadletter.Reenqueue(ctx, b.Pool, b.Key, ids, deadletter.Options{By: "oncall"})
	require.NoError(t, err)
	for i, r := range again {
		require.Equal(t, deadletter.OutcomeAlreadyReenqueued, r.Outcome)
		require.Equal(t, results[i].NewOutboxSeq, r.NewOutboxSeq)
		require.Equal(t, results[i].JournalSeq, r.JournalSeq)
		require.Equal(t, "oncall", r.By)
	}
	var copies int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE event_type = 'deadletter.reenqueued'`).Scan(&copies))
	require.Equal(t, 3, copies, "the second re-enqueue journalled nothing")

	// Until the drain, the re-enqueued rows are pending, not findings.
	rep = b.reconcile(t, reconcile.Options{})
	requireClean(t, rep)

	require.Empty(t, b.drain(t), "the repaired rows apply")
	rep = b.reconcile(t, reconcile.Options{})
	requireClean(t, rep)
	open, err = deadletter.List(ctx, b.Pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, open)
	all, err := deadletter.List(ctx, b.Pool, deadletter.ListOptions{All: true})
	require.NoError(t, err)
	require.Len(t, all, 3)

	vr, err := chainverify.VerifyDB(ctx, b.Pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, vr.Findings, "every chain verifies")
	var skipped, reenq int
	require.NoError(t, b.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE event_type = 'materialize.skipped'), count(*) FILTER (WHERE event_type = 'deadletter.reenqueued')
FROM oml.journal`).Scan(&skipped, &reenq))
	require.Equal(t, 3, skipped)
	require.Equal(t, 3, reenq)
}

// TestRepairStory_DeadLetteredPromotionThenItsRetract: a promotion whose
// held body is missing is dead-lettered; the claim is then demoted, and the
// retract of a row that never reached silver is dead-lettered too. Reconcile
// reports exactly the two dead letters (not a missing row, not a state
// mismatch). Restoring the body and re-enqueueing both (--all goes in id
// order: the promotion first) ends with the claim demoted in silver and a
// clean reconcile.
func TestRepairStory_DeadLetteredPromotionThenItsRetract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tn := b.Tenants[0]
	body := []byte("ciphertext of a claim whose held body will go missing")
	sum := sha256.Sum256(body)
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: "a", Version: 1, WorkareaID: "wa", Writer: "alice",
		Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:])},
		body, make([]byte, 32))
	require.NoError(t, err)
	_, err = chain.Append(ctx, b.Pool, b.Key, tn, sub, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}))
	require.NoError(t, err)
	b.exec(t, `DELETE FROM oml.claim_bodies WHERE tenant_id = $1`, tn)
	require.Len(t, b.drain(t), 1)

	_, err = chain.Append(ctx, b.Pool, b.Key, tn, journal.MustNew(journal.ClaimDemoted{ArtifactID: "a", Version: 1, By: "carol", Reason: "wrong"}))
	require.NoError(t, err)
	require.Len(t, b.drain(t), 1, "the retract of a row that is not in silver is dead-lettered too")

	rep := b.reconcile(t, reconcile.Options{})
	require.EqualValues(t, 2, rep.Counts[reconcile.DeadLettered])
	require.EqualValues(t, 2, rep.Total(), "%v", rep.Counts)

	b.exec(t, `INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext) VALUES ($1, 'a', 1, $2)`, tn, body)
	ids, err := deadletter.OpenIDs(ctx, b.Pool, nil)
	require.NoError(t, err)
	require.Len(t, ids, 2)
	res, err := deadletter.Reenqueue(ctx, b.Pool, b.Key, ids, deadletter.Options{By: "oncall"})
	require.NoError(t, err)
	require.Less(t, res[0].NewOutboxSeq, res[1].NewOutboxSeq, "the promotion is re-applied before its retract")
	require.Empty(t, b.drain(t))
	requireClean(t, b.reconcile(t, reconcile.Options{}))

	_, rows := testkit.ReadRows(t, tableStore(t, b, tn, tables.Silver))
	require.Len(t, rows, 1)
	require.Equal(t, "demoted", rows[0][tables.SilverState])
}

// TestReconcile_BronzeRowsChangedOrDuplicated: the provider tenant's
// bronze table is rewritten with one event's hash changed and another event
// written twice: digest-mismatch and duplicate-in-lake, each naming the seq.
func TestReconcile_BronzeRowsChangedOrDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	require.Empty(t, b.drain(t))
	requireClean(t, b.reconcile(t, reconcile.Options{}))

	testkit.RewriteTable(t, tableStore(t, b, journal.ProviderTenant, tables.Bronze), func(rs []pq.Row) []pq.Row {
		require.GreaterOrEqual(t, len(rs), 2)
		h := append([]byte(nil), rs[0][tables.BronzeHash].([]byte)...)
		h[0] ^= 0xff
		rs[0][tables.BronzeHash] = h
		return append(rs, append(pq.Row(nil), rs[1]...))
	})
	rep := b.reconcile(t, reconcile.Options{})
	got := byClass(rep)
	require.EqualValues(t, 2, rep.Total(), "%v", rep.Counts)
	require.Len(t, got[reconcile.DigestMismatch], 1)
	require.EqualValues(t, 1, got[reconcile.DigestMismatch][0].Seq)
	require.Contains(t, got[reconcile.DigestMismatch][0].Detail, "hash: lake")
	require.Len(t, got[reconcile.DuplicateInLake], 1)
	require.EqualValues(t, 2, got[reconcile.DuplicateInLake][0].Seq)
	require.Equal(t, string(tables.Bronze), got[reconcile.DuplicateInLake][0].Table)
}

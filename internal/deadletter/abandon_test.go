package deadletter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/tenant"
)

// TestAbandon_BodyGoneForGood_JournalledClosedAndReenqueueRefused: a dead
// letter whose held body can never come back is abandoned: one signed
// deadletter.abandoned on the tenant's chain with who, why and which; the
// dead letter is closed (not listed as open, not re-enqueueable, a second
// abandon is told it already was); the chain verifies end to end.
func TestAbandon_BodyGoneForGood_JournalledClosedAndReenqueueRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.deadLetter(t, "lost")
	other := b.deadLetter(t, "kept")

	res, err := deadletter.Abandon(ctx, b.pool, b.key, []int64{id}, deadletter.AbandonOptions{By: "op", Reason: "body lost with the old primary"})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, deadletter.OutcomeAbandoned, res[0].Outcome, "%+v", res[0])

	var evType string
	var payload []byte
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT event_type, payload FROM oml.journal WHERE tenant_id = $1 AND seq = $2`,
		b.tn, res[0].JournalSeq).Scan(&evType, &payload))
	require.Equal(t, string(journal.TypeDeadletterAbandoned), evType)
	p, err := journal.Decode(journal.TypeDeadletterAbandoned, payload)
	require.NoError(t, err)
	ab := p.(journal.DeadletterAbandoned)
	require.Equal(t, id, ab.DeadLetterID)
	require.Equal(t, "op", ab.By)
	require.Equal(t, "body lost with the old primary", ab.Reason)

	open, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Len(t, open, 1, "only the other dead letter is still open")
	require.Equal(t, other, open[0].ID)
	l, err := deadletter.Get(ctx, b.pool, id)
	require.NoError(t, err)
	require.True(t, l.Abandoned)
	require.False(t, l.Open())
	require.Equal(t, res[0].JournalSeq, *l.AbandonedSeq)

	rr, err := deadletter.Reenqueue(ctx, b.pool, b.key, []int64{id}, deadletter.Options{By: "op"})
	require.NoError(t, err)
	require.Equal(t, deadletter.OutcomeRefusedAbandoned, rr[0].Outcome)
	require.Contains(t, rr[0].Error, "was abandoned")
	require.Contains(t, rr[0].Error, "cannot be re-enqueued")
	var copies int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE target = 'silver.claims' AND op = 'materialize' AND artifact_id = 'lost'`).Scan(&copies))
	require.Equal(t, 1, copies, "a refused re-enqueue inserts nothing")

	// The fold refuses it too, whoever appends the event.
	_, err = chain.Append(ctx, b.pool, b.key, b.tn, journal.MustNew(journal.DeadletterReenqueued{DeadLetterID: id, OutboxSeq: l.OutboxSeq, By: "raw"}))
	require.ErrorContains(t, err, "cannot be re-enqueued")

	again, err := deadletter.Abandon(ctx, b.pool, b.key, []int64{id}, deadletter.AbandonOptions{By: "op2", Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, deadletter.OutcomeAlreadyAbandoned, again[0].Outcome)
	require.Equal(t, "op", again[0].By)

	rep, err := chainverify.VerifyDB(ctx, b.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, rep.Findings)
}

// TestAbandon_ReenqueuedOrMissing_Refused: a re-enqueued dead letter has
// its work back in the outbox and cannot be abandoned; an unknown id is not
// found; abandon needs a reason.
func TestAbandon_ReenqueuedOrMissing_Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.deadLetter(t, "a")
	_, err := deadletter.Reenqueue(ctx, b.pool, b.key, []int64{id}, deadletter.Options{By: "op"})
	require.NoError(t, err)

	res, err := deadletter.Abandon(ctx, b.pool, b.key, []int64{id, 999}, deadletter.AbandonOptions{By: "op", Reason: "r"})
	require.NoError(t, err)
	require.Equal(t, deadletter.OutcomeFailed, res[0].Outcome)
	require.Contains(t, res[0].Error, "re-enqueued")
	require.Equal(t, deadletter.OutcomeNotFound, res[1].Outcome)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE event_type = 'deadletter.abandoned'`).Scan(&n))
	require.Zero(t, n)

	_, err = deadletter.Abandon(ctx, b.pool, b.key, []int64{id}, deadletter.AbandonOptions{By: "op"})
	require.ErrorContains(t, err, "reason")
}

// TestAbandon_FoldRefusesAnEventForAnotherTenantsDeadLetter: the fold, not
// only the command, keeps a tenant's chain from closing another tenant's
// dead letter.
func TestAbandon_FoldRefusesAnEventForAnotherTenantsDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.deadLetter(t, "a")
	var oseq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT outbox_seq FROM oml.dead_letter WHERE id = $1`, id).Scan(&oseq))
	other, _, err := tenant.Create(ctx, b.pool, b.key, "globex")
	require.NoError(t, err)
	_, err = chain.Append(ctx, b.pool, b.key, other.ID, journal.MustNew(journal.DeadletterAbandoned{DeadLetterID: id, OutboxSeq: oseq, By: "x", Reason: "y"}))
	require.ErrorContains(t, err, "abandon it on its tenant's chain")
	l, err := deadletter.Get(ctx, b.pool, id)
	require.NoError(t, err)
	require.True(t, l.Open())
}

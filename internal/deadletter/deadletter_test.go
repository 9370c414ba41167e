package deadletter_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

type bundle struct {
	pool *pgxpool.Pool
	key  *keys.Key
	tn   uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := testkit.NewDeploymentNamed(t, "acme")
	return &bundle{pool: d.Pool, key: d.Key, tn: d.Tenants[0]}
}

// deadLetter promotes a claim and dead-letters its materialize row the way
// the lake writer does (a materialize.skipped event), returning the id.
func (b *bundle) deadLetter(t *testing.T, artifact string) int64 {
	t.Helper()
	ctx := context.Background()
	body := make([]byte, 48)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	dek := make([]byte, 32)
	_, _ = rand.Read(dek)
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: artifact, Version: 1, WorkareaID: "wa", Writer: "alice",
		Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:])}, body, dek)
	require.NoError(t, err)
	_, err = chain.Append(ctx, b.pool, b.key, b.tn, sub, journal.MustNew(journal.ClaimPromoted{ArtifactID: artifact, Version: 1, By: "bob"}))
	require.NoError(t, err)
	var oseq, jseq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq, journal_seq FROM oml.outbox WHERE tenant_id = $1 AND target = 'silver.claims' AND op = 'materialize' AND artifact_id = $2`,
		b.tn, artifact).Scan(&oseq, &jseq))
	_, err = chain.Append(ctx, b.pool, b.key, b.tn, journal.MustNew(journal.MaterializeSkipped{OutboxSeq: oseq, JournalSeq: jseq,
		Target: "silver.claims", Op: "materialize", ArtifactID: artifact, Version: 1, Attempts: 5, Error: "ciphertext digest mismatch", By: "oml-lakewriter"}))
	require.NoError(t, err)
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM oml.dead_letter WHERE outbox_seq = $1`, oseq).Scan(&id))
	return id
}

// TestReenqueue_ConcurrentCallersReenqueueOnce: several operators re-enqueue
// the same dead letter at once; exactly one journals deadletter.reenqueued
// and inserts the copy, the others are told it already was.
func TestReenqueue_ConcurrentCallersReenqueueOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.deadLetter(t, "a")

	const n = 6
	var wg sync.WaitGroup
	results := make([]deadletter.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			rs, err := deadletter.Reenqueue(ctx, b.pool, b.key, []int64{id}, deadletter.Options{By: "op"})
			errs[i] = err
			if err == nil {
				results[i] = rs[0]
			}
		}(i)
	}
	close(start)
	wg.Wait()
	done := 0
	for i := range results {
		require.NoError(t, errs[i])
		switch results[i].Outcome {
		case deadletter.OutcomeReenqueued:
			done++
		case deadletter.OutcomeAlreadyReenqueued:
		default:
			t.Fatalf("caller %d: %+v", i, results[i])
		}
	}
	require.Equal(t, 1, done)
	var events, copies int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE event_type = 'deadletter.reenqueued'`).Scan(&events))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE target = 'silver.claims' AND op = 'materialize'`).Scan(&copies))
	require.Equal(t, 1, events)
	require.Equal(t, 2, copies, "the original row and one copy")
}

// TestReenqueue_JournalsWhoWhyAndWhich: the event carries the dead letter,
// the original outbox seq, by and reason; the dead letter records the
// event and the new outbox row; a missing id is an outcome, not an error.
func TestReenqueue_JournalsWhoWhyAndWhich(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.deadLetter(t, "a")
	l, err := deadletter.Get(ctx, b.pool, id)
	require.NoError(t, err)

	rs, err := deadletter.Reenqueue(ctx, b.pool, b.key, []int64{id, 424242}, deadletter.Options{By: "carol", Reason: "restored from backup"})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, deadletter.OutcomeReenqueued, rs[0].Outcome)
	require.False(t, rs[0].PayloadRederived, "the payload matched the journal")
	require.Equal(t, deadletter.OutcomeNotFound, rs[1].Outcome)
	require.Contains(t, rs[1].Error, "no such dead letter 424242")

	var payload []byte
	var evType string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT event_type, payload FROM oml.journal WHERE tenant_id = $1 AND seq = $2`,
		b.tn, rs[0].JournalSeq).Scan(&evType, &payload))
	require.Equal(t, "deadletter.reenqueued", evType)
	p, err := journal.Decode(journal.TypeDeadletterReenqueued, payload)
	require.NoError(t, err)
	require.Equal(t, journal.DeadletterReenqueued{DeadLetterID: id, OutboxSeq: l.OutboxSeq, By: "carol", Reason: "restored from backup"}, p)

	d, err := deadletter.Show(ctx, b.pool, id)
	require.NoError(t, err)
	require.True(t, d.Reenqueued)
	require.Equal(t, rs[0].JournalSeq, *d.ReenqueuedSeq)
	require.Equal(t, rs[0].NewOutboxSeq, *d.NewOutboxSeq)
	require.Equal(t, "carol", *d.ReenqueuedBy)
	require.NotNil(t, d.ReenqueuedEvent)
	require.NotNil(t, d.Copy)
	require.JSONEq(t, string(d.Original.Payload), string(d.Copy.Payload))
	require.True(t, d.PayloadMatches)

	open, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, open)
	since, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{All: true, Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, since, "--since filters by first failure")
	other := uuid.New()
	none, err := deadletter.List(ctx, b.pool, deadletter.ListOptions{All: true, Tenant: &other})
	require.NoError(t, err)
	require.Empty(t, none)

	_, err = deadletter.Reenqueue(ctx, b.pool, b.key, []int64{id}, deadletter.Options{})
	require.ErrorContains(t, err, "needs an identity")
}

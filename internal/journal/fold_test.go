package journal_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/testkit"
)

type bundle struct {
	pool *pgxpool.Pool
	key  *keys.Key
	tn   uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := testkit.NewDeploymentNamed(t, "fold")
	// Whatever the test did, the claim state and the outbox must be what a
	// replay of the chain implies.
	t.Cleanup(func() {
		require.NoError(t, journal.CheckFold(context.Background(), d.Pool, d.Tenants[0]))
	})
	return &bundle{pool: d.Pool, key: d.Key, tn: d.Tenants[0]}
}

func (b *bundle) append(t *testing.T, evs ...journal.Event) error {
	t.Helper()
	_, err := chain.Append(context.Background(), b.pool, b.key, b.tn, evs...)
	return err
}

func submission(t *testing.T, artifact string, version int, writer, provenance string, dek []byte) journal.Event {
	t.Helper()
	body := make([]byte, 48)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	if dek == nil {
		dek = make([]byte, 32)
		_, _ = rand.Read(dek)
	}
	ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
		ArtifactID: artifact, Version: version, WorkareaID: "wa-1", Writer: writer, Principal: "p",
		Provenance: provenance, PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:]),
	}, body, dek)
	require.NoError(t, err)
	return ev
}

// aPromotedTwice is claim a's versions 1 and 2 (alice's, under dek), each
// submitted and promoted by bob: where the lineage and derivation
// histories start.
func aPromotedTwice(t *testing.T, dek []byte) []journal.Event {
	t.Helper()
	return []journal.Event{
		submission(t, "a", 1, "alice", "human", dek),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}),
		submission(t, "a", 2, "alice", "human", dek),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 2, By: "bob"}),
	}
}

func (b *bundle) claimState(t *testing.T, artifact string, version int) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT state FROM oml.claims WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`, b.tn, artifact, version).Scan(&s))
	return s
}

// outboxOps lists (journal event type, target, op) of the tenant's outbox
// rows after its genesis, in outbox order.
func (b *bundle) outboxOps(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT j.event_type || ' ' || o.target || ' ' || o.op
		  FROM oml.outbox o JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
		 WHERE o.tenant_id = $1 AND o.journal_seq > 1 ORDER BY o.seq`, b.tn)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

func TestFold_LifecycleAndOutboxRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.append(t, submission(t, "a", 1, "alice", "human", nil)))
	require.Equal(t, journal.StateHeld, b.claimState(t, "a", 1))
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"})))
	require.Equal(t, journal.StatePromoted, b.claimState(t, "a", 1))
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimDemoted{ArtifactID: "a", Version: 1, By: "carol"})))
	require.Equal(t, journal.StateDemoted, b.claimState(t, "a", 1))
	// A held claim demoted has no silver row: no retract.
	require.NoError(t, b.append(t, submission(t, "h", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "h", Version: 1, By: "carol"})))
	require.Equal(t, []string{
		"claim.submitted bronze.events append",
		"claim.promoted bronze.events append",
		"claim.promoted silver.claims materialize",
		"claim.promoted gold.lineage materialize",
		"claim.promoted gold.workareas materialize",
		"claim.demoted bronze.events append",
		"claim.demoted silver.claims retract",
		"claim.demoted gold.lineage retract",
		"claim.demoted gold.workareas retract",
		"claim.submitted bronze.events append",
		"claim.demoted bronze.events append",
	}, b.outboxOps(t))
}

func TestFold_PromotionNeedsASecondIdentityAndAHeldClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.append(t, submission(t, "a", 1, "alice", "human", nil)))
	err := b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "alice"}))
	require.ErrorIs(t, err, journal.ErrRejected)
	require.ErrorContains(t, err, "own writer")
	err = b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "nope", Version: 1, By: "bob"}))
	require.ErrorContains(t, err, "has no claim nope v1")
	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"})))
	err = b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}))
	require.ErrorContains(t, err, "only a held claim")
	// A rejected event writes nothing: the chain is 1 genesis + 2 events.
	h, _, err := chain.ReadHead(context.Background(), b.pool, b.tn)
	require.NoError(t, err)
	require.Equal(t, uint64(3), h.Seq)
}

func TestFold_ErasureDestroysTheDataKeyAndRetractsEveryPromotedVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	dek := make([]byte, 32)
	dek[0] = 1
	require.NoError(t, b.append(t,
		submission(t, "a", 1, "alice", "human", dek),
		submission(t, "a", 2, "alice", "human", dek),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 2, By: "bob"})))
	err := b.append(t, submission(t, "a", 3, "alice", "human", nil))
	require.ErrorContains(t, err, "different data key")

	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo", Reason: "gdpr"})))
	require.Equal(t, journal.StateErased, b.claimState(t, "a", 1))
	require.Equal(t, journal.StateErased, b.claimState(t, "a", 2))
	var keysLeft int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.claim_keys WHERE tenant_id = $1`, b.tn).Scan(&keysLeft))
	require.Zero(t, keysLeft)
	ops := b.outboxOps(t)
	require.Equal(t, "claim.erased gold.workareas retract", ops[len(ops)-1], "only v2 was promoted")
	require.Equal(t, "claim.erased gold.lineage retract", ops[len(ops)-2])
	require.Equal(t, "claim.erased silver.claims retract", ops[len(ops)-3])
	require.Equal(t, "claim.erased bronze.events append", ops[len(ops)-4])

	err = b.append(t, journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo"}))
	require.ErrorContains(t, err, "already erased")
	err = b.append(t, submission(t, "a", 4, "alice", "human", dek))
	require.ErrorContains(t, err, "was erased")
	err = b.append(t, journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}))
	require.ErrorContains(t, err, "is erased")
}

// A whole-chain replay (one fold over the tenant's every claim, as
// reconcile's gold audit and CheckFold run it) refuses a new version of an
// erased artifact like the append path does: its per-artifact index of the
// claims sees versions the same replay submitted and erased.
func TestReplay_NewVersionOfAnArtifactErasedInTheSameReplay_IsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	dek := make([]byte, 32)
	require.NoError(t, b.append(t, append(aPromotedTwice(t, dek),
		journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo"}))...))
	evs, err := journal.ReadChain(ctx, b.pool, b.tn)
	require.NoError(t, err)
	claims, _, err := journal.Replay(b.tn, evs)
	require.NoError(t, err)
	require.Equal(t, journal.StateErased, claims[journal.ClaimRef{ArtifactID: "a", Version: 1}].State)
	require.Equal(t, journal.StateErased, claims[journal.ClaimRef{ArtifactID: "a", Version: 2}].State)

	last := evs[len(evs)-1]
	v3 := submission(t, "a", 3, "alice", "human", dek)
	_, _, err = journal.Replay(b.tn, append(evs, journal.ReplayEvent{Seq: last.Seq + 1, RecordedAt: last.RecordedAt, Type: v3.Type, Payload: v3.Payload}))
	require.ErrorContains(t, err, "artifact a was erased")
}

func TestFold_SubmissionBodyMustMatchItsDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := submission(t, "a", 1, "alice", "human", nil)
	ev.Body = append([]byte{}, ev.Body...)
	ev.Body[0] ^= 1
	err := b.append(t, ev)
	require.ErrorContains(t, err, "not the ciphertext_digest")
}

func TestFold_SimulationEndedAndReassigned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.append(t,
		submission(t, "s", 1, "sim-agent", "simulation", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "s", Version: 1, By: "bob"}),
		submission(t, "h", 1, "alice", "human", nil)))
	err := b.append(t, journal.MustNew(journal.SimulationEnded{SimulationID: "sim-1", By: "ops",
		Claims: []journal.ClaimRef{{ArtifactID: "s", Version: 1}, {ArtifactID: "h", Version: 1}}}))
	require.ErrorContains(t, err, `provenance is "human"`)
	require.NoError(t, b.append(t, journal.MustNew(journal.SimulationEnded{SimulationID: "sim-1", By: "ops",
		Claims: []journal.ClaimRef{{ArtifactID: "s", Version: 1}}})))
	require.Equal(t, journal.StateSimulationEnded, b.claimState(t, "s", 1))

	require.NoError(t, b.append(t, journal.MustNew(journal.ClaimReassigned{ArtifactID: "h", Version: 1, By: "ops", ToWorkareaID: "wa-2"})))
	require.Equal(t, journal.StateReassigned, b.claimState(t, "h", 1))
	ops := b.outboxOps(t)
	require.Equal(t, []string{
		"simulation.ended bronze.events append",
		"simulation.ended silver.claims retract",
		"simulation.ended gold.lineage retract",
		"simulation.ended gold.workareas retract",
		"claim.reassigned bronze.events append", // h was never promoted: no silver row, no lineage
	}, ops[len(ops)-5:])
}

func TestFold_SkipDeadLettersAndReenqueueCopiesTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	require.NoError(t, b.append(t, submission(t, "a", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"})))
	var oseq, jseq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq, journal_seq FROM oml.outbox WHERE tenant_id = $1 AND target = 'silver.claims' AND op = 'materialize'`, b.tn).Scan(&oseq, &jseq))

	skip := journal.MustNew(journal.MaterializeSkipped{OutboxSeq: oseq, JournalSeq: jseq, Target: "silver.claims", Op: "materialize",
		ArtifactID: "a", Version: 1, Attempts: 5, Error: "ciphertext digest mismatch", By: "oml-lakewriter"})
	require.NoError(t, b.append(t, skip))
	require.ErrorContains(t, b.append(t, skip), "already dead-lettered")

	var dlID int64
	var payload string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id, payload::text FROM oml.dead_letter WHERE outbox_seq = $1`, oseq).Scan(&dlID, &payload))
	require.Contains(t, payload, `"state": "promoted"`)

	re := journal.MustNew(journal.DeadletterReenqueued{DeadLetterID: dlID, OutboxSeq: oseq, By: "ops", Reason: "fixed the body"})
	require.NoError(t, b.append(t, re))
	require.ErrorContains(t, b.append(t, re), "already re-enqueued")
	var newSeq int64
	var target, op string
	var copyJseq int64
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT o.seq, o.target, o.op, o.journal_seq FROM oml.dead_letter d JOIN oml.outbox o ON o.seq = d.new_outbox_seq
		 WHERE d.id = $1`, dlID).Scan(&newSeq, &target, &op, &copyJseq))
	require.Greater(t, newSeq, oseq)
	require.Equal(t, "silver.claims", target)
	require.Equal(t, "materialize", op)
	require.Equal(t, jseq, copyJseq, "the copy is the same work: same journal event")
}

func TestFold_ChainShapeRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.append(t, journal.MustNew(journal.TenantCreated{TenantID: uuid.NewString(), Name: "x"}))
	require.ErrorContains(t, err, "belongs on the provider chain")
	_, err = chain.Append(context.Background(), b.pool, b.key, journal.ProviderTenant, submission(t, "a", 1, "w", "human", nil))
	require.ErrorContains(t, err, "cannot be appended to the provider chain")
}

// One batch may carry a claim's whole life; the fold runs over the state
// as the batch changes it, and the outbox follows the event order.
func TestFold_WholeLifeInOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	require.NoError(t, b.append(t,
		submission(t, "a", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}),
		journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo"})))
	require.Equal(t, journal.StateErased, b.claimState(t, "a", 1))
	require.Equal(t, []string{
		"claim.submitted bronze.events append",
		"claim.promoted bronze.events append",
		"claim.promoted silver.claims materialize",
		"claim.promoted gold.lineage materialize",
		"claim.promoted gold.workareas materialize",
		"claim.erased bronze.events append",
		"claim.erased silver.claims retract",
		"claim.erased gold.lineage retract",
		"claim.erased gold.workareas retract",
	}, b.outboxOps(t))
	var keys int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.claim_keys WHERE tenant_id = $1`, b.tn).Scan(&keys))
	require.Zero(t, keys, "a key submitted and erased in one batch is never stored")
	// A rejected event anywhere in a batch rejects the whole batch.
	err := b.append(t,
		submission(t, "b", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "b", Version: 1, By: "alice"}))
	require.ErrorIs(t, err, journal.ErrRejected)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.claims WHERE tenant_id = $1 AND artifact_id = 'b'`, b.tn).Scan(&n))
	require.Zero(t, n)
}

// CheckFold notices state that the chain does not imply.
func TestCheckFold_DetectsDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testkit.NewDeploymentNamed(t, "drift")
	pool, tn := d.Pool, d.Tenants[0]
	_, err := chain.Append(ctx, pool, d.Key, tn, submission(t, "a", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"}))
	require.NoError(t, err)
	require.NoError(t, journal.CheckFold(ctx, pool, tn))

	_, err = pool.Exec(ctx, `UPDATE oml.claims SET state = 'held' WHERE tenant_id = $1`, tn)
	require.NoError(t, err)
	require.ErrorContains(t, journal.CheckFold(ctx, pool, tn), "state is held, the journal says promoted")
	_, err = pool.Exec(ctx, `UPDATE oml.claims SET state = 'promoted' WHERE tenant_id = $1`, tn)
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `UPDATE oml.outbox SET payload = '{"state":"demoted"}' WHERE tenant_id = $1 AND op = 'materialize'`, tn)
	require.NoError(t, err)
	require.ErrorContains(t, journal.CheckFold(ctx, pool, tn), "payload")
	_, err = pool.Exec(ctx, `DELETE FROM oml.outbox WHERE tenant_id = $1 AND op = 'materialize'`, tn)
	require.NoError(t, err)
	require.ErrorContains(t, journal.CheckFold(ctx, pool, tn), "lacks")
}

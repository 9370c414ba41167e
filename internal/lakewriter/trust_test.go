package lakewriter_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// forgedRow is an outbox row the application role writes behind the append
// path (the attacks of issue 12).
type forgedRow struct {
	tenant     uuid.UUID
	journalSeq int64
	target, op string
	artifact   *string
	version    *int32
	payload    string
}

// plant inserts r as the application would today: as oml_app, with the
// oml.tenant_id setting it chose (row-level security checks only that the
// row matches the setting). If the database refuses that (a later schema
// may check outbox rows against the journal: defence in depth means the
// writer must still refuse what slips past), the row is planted as the
// superuser with triggers off, stamping the xid as the trigger would (and
// marking it as a copy, which gets it past outbox_implied_once), so the
// writer's own check is what is tested either way.
func (b *bundle) plant(t *testing.T, r forgedRow) int64 {
	t.Helper()
	ctx := context.Background()
	const insert = `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING seq`
	var seq int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE oml_app`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('oml.tenant_id', $1, true)`, r.tenant.String()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, insert, r.tenant, r.journalSeq, r.target, r.op, r.artifact, r.version, r.payload).Scan(&seq)
	})
	if err == nil {
		b.expectDead(seq)
		return seq
	}
	t.Logf("the database refused the forged outbox row as oml_app (%v); planting it as the superuser with triggers off", err)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// Take the xid before the seq is drawn, as oml.outbox_take_xid does.
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica; SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		// A copy_of of no row gets past outbox_implied_once too (the index
		// allows one row per copy_of; its trigger is off), as a forger with
		// the triggers off could.
		return tx.QueryRow(ctx, `INSERT INTO oml.outbox (xid, tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of)
VALUES (pg_current_xact_id(), $1, $2, $3, $4, $5, $6, $7::jsonb, -(random() * 1e15)::bigint) RETURNING seq`,
			r.tenant, r.journalSeq, r.target, r.op, r.artifact, r.version, r.payload).Scan(&seq)
	})
	require.NoError(t, err)
	b.expectDead(seq)
	return seq
}

// requireChainsClean: every chain verifies, and the fold state and outbox
// of every tenant but forgedIn (whose outbox holds the forged rows, which
// CheckFold rightly reports) agree with its chain.
func (b *bundle) requireChainsClean(t *testing.T, forgedIn ...uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	rep, err := chainverify.VerifyDB(ctx, b.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "every chain verifies")
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, b.tenants...) {
		err := journal.CheckFold(ctx, b.pool, tn)
		if slices.Contains(forgedIn, tn) {
			require.ErrorContains(t, err, "differs from the journal fold", "the forged outbox row of %s is detected", tn)
			continue
		}
		require.NoError(t, err, "the fold of %s agrees with its chain", tn)
	}
}

// deadLetterChain returns the tenant whose chain journalled the dead letter
// of outbox row seq (its materialize.skipped event).
func (b *bundle) deadLetterChain(t *testing.T, seq int64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var skipped int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT skipped_seq FROM oml.dead_letter WHERE outbox_seq = $1`, seq).Scan(&skipped))
	rows, err := b.pool.Query(ctx, `SELECT tenant_id, payload FROM oml.journal WHERE seq = $1 AND event_type = 'materialize.skipped'`, skipped)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var tn uuid.UUID
		var payload []byte
		require.NoError(t, rows.Scan(&tn, &payload))
		var p journal.MaterializeSkipped
		require.NoError(t, json.Unmarshal(payload, &p))
		if p.OutboxSeq == seq {
			return tn
		}
	}
	require.NoError(t, rows.Err())
	t.Fatalf("no materialize.skipped event names outbox row %d", seq)
	return uuid.Nil
}

// TestTrust_GhostTenantRowAsApp_DeadLetteredOnProviderChain: the application
// role inserts outbox rows for a tenant id that does not exist (RLS lets it
// pick the setting). The writer must not treat them as an outage: --once
// ends, they are dead-lettered with a materialize.skipped on the provider
// chain (the ghost has no chain), no table is created for the ghost, every
// other row reaches the lake exactly once, a normal workload still appends
// and drains afterwards, and every chain verifies.
func TestTrust_GhostTenantRowAsApp_DeadLetteredOnProviderChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 20, Seed: 71})
	ghost := uuid.New()
	art, ver := "ghost-artifact", int32(1)
	planted := []int64{
		b.plant(t, forgedRow{tenant: ghost, journalSeq: 1, target: "bronze.events", op: "append", payload: `{"event_type":"tenant.genesis"}`}),
		b.plant(t, forgedRow{tenant: ghost, journalSeq: 2, target: "silver.claims", op: "materialize", artifact: &art, version: &ver,
			payload: `{"workarea_id":"w","writer":"a","principal":"p","provenance":"human","plaintext_digest":"00","ciphertext_digest":"00","state":"promoted","promoted_by":"b","submitted_seq":1,"promoted_seq":2}`}),
	}
	b.load(t, workload.Config{Claims: 10, Seed: 72}) // legitimate rows after the ghost's

	lake := store.NewMem()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Equal(t, planted, sortedInt64(sum.DeadLettered), "exactly the ghost's rows are dead-lettered")
	for _, seq := range planted {
		require.Equal(t, journal.ProviderTenant, b.deadLetterChain(t, seq), "a ghost's dead letter is journalled on the provider chain")
		var id int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM oml.dead_letter WHERE outbox_seq = $1`, seq).Scan(&id))
		detail, err := deadletter.Show(ctx, b.pool, id)
		require.NoError(t, err)
		require.NotNil(t, detail.Skipped, "oml deadletter show finds the skip on the provider chain")
		require.Equal(t, "materialize.skipped", detail.Skipped.EventType)
	}
	objs, err := lake.List(ctx, ghost.String()+"/", "")
	require.NoError(t, err)
	require.Empty(t, objs, "nothing of the ghost tenant is in the lake, not even an empty table")

	b.load(t, workload.Config{Claims: 5, Seed: 73}) // the application still appends
	b.drainAll(t, d)
	b.verifyLake(t, lake)
	b.requireChainsClean(t)
}

// TestTrust_ForgedMaterializeOfHeldClaim_PoisonNoHeldBodyInLake: the
// application role inserts silver.claims materialize rows for a claim
// nobody promoted, with a payload that copies the claim's real attribution
// and digests (so the held body would pass the digest check), citing once
// the claim's own submission event and once another claim's promotion. Both
// are poison: dead-lettered on the claim's tenant chain, and the held body
// never reaches silver.
func TestTrust_ForgedMaterializeOfHeldClaim_PoisonNoHeldBodyInLake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 30, Seed: 74, PromoteRatio: 0.5, RetractRatio: 0.01})

	var (
		tn                uuid.UUID
		art, otherArt     string
		ver, otherVer     int32
		wa, wr, pr, pv    string
		pd, cd, heldBody  []byte
		subSeq, otherProm int64
	)
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT c.tenant_id, c.artifact_id, c.version, c.workarea_id, c.writer, c.principal, c.provenance,
       c.plaintext_digest, c.ciphertext_digest, c.submitted_seq, b.ciphertext
FROM oml.claims c JOIN oml.claim_bodies b USING (tenant_id, artifact_id, version)
WHERE c.state = 'held' ORDER BY c.tenant_id, c.artifact_id LIMIT 1`).
		Scan(&tn, &art, &ver, &wa, &wr, &pr, &pv, &pd, &cd, &subSeq, &heldBody))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT artifact_id, version, promoted_seq FROM oml.claims
WHERE tenant_id = $1 AND promoted_seq IS NOT NULL ORDER BY promoted_seq LIMIT 1`, tn).Scan(&otherArt, &otherVer, &otherProm))

	forge := func(journalSeq, promotedSeq int64) int64 {
		p, _ := json.Marshal(journal.MaterializePayload{WorkareaID: wa, Writer: wr, Principal: pr, Provenance: pv,
			PlaintextDigest: hex.EncodeToString(pd), CiphertextDigest: hex.EncodeToString(cd), State: journal.StatePromoted,
			PromotedBy: "mallory", SubmittedSeq: subSeq, PromotedSeq: promotedSeq})
		return b.plant(t, forgedRow{tenant: tn, journalSeq: journalSeq, target: "silver.claims", op: "materialize",
			artifact: &art, version: &ver, payload: string(p)})
	}
	planted := []int64{
		forge(subSeq, subSeq),       // cites the claim's own submission
		forge(otherProm, otherProm), // cites another claim's promotion
	}

	lake := store.NewMem()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Equal(t, planted, sortedInt64(sum.DeadLettered))
	for _, seq := range planted {
		require.Equal(t, tn, b.deadLetterChain(t, seq), "dead-lettered on the claim's tenant chain")
	}
	for _, r := range readSilver(t, lake, tn) {
		require.False(t, r.ArtifactID == art && r.Version == ver, "the held claim %s v%d is in silver", art, ver)
		require.False(t, bytes.Equal(r.Body, heldBody), "the held body is in silver")
	}
	b.load(t, workload.Config{Claims: 5, Seed: 75})
	b.drainAll(t, d)
	b.verifyLake(t, lake)
	b.requireChainsClean(t, tn)
}

// TestTrust_ForgedBronzeRows_Poison: bronze rows that do not match the
// journal event they cite are poison: one whose payload names another event
// type, and one citing a journal row the application inserted itself with a
// hash that its columns do not produce (the journal forgery is chain
// verify's finding; the lake writer must not copy it into bronze).
func TestTrust_ForgedBronzeRows_Poison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 76})
	tn := b.tenants[0]
	const farSeq = 1_000_000
	// A journal row the application inserts behind the append path (today
	// the role may; a later schema may refuse it, then as the superuser).
	forged := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
VALUES ($1, $2, decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'), decode(repeat('22', 64), 'hex'),
        'forged', 'claim.submitted', convert_to('{}', 'UTF8'), now())`, tn, farSeq)
		return err
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE oml_app`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('oml.tenant_id', $1, true)`, tn.String()); err != nil {
			return err
		}
		return forged(tx)
	})
	if err != nil {
		t.Logf("the database refused the forged journal row as oml_app (%v); inserting it as the superuser with triggers off", err)
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
				return err
			}
			return forged(tx)
		}))
	}
	planted := []int64{
		b.plant(t, forgedRow{tenant: tn, journalSeq: 2, target: "bronze.events", op: "append", payload: `{"event_type":"tenant.genesis"}`}),
		b.plant(t, forgedRow{tenant: tn, journalSeq: farSeq, target: "bronze.events", op: "append", payload: `{"event_type":"claim.submitted"}`}),
	}
	lake := store.NewMem()
	sum := b.drainInto(t, lake)
	require.Equal(t, planted, sortedInt64(sum.DeadLettered))
	var bronzeErr string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT error FROM oml.dead_letter WHERE outbox_seq = $1`, planted[1]).Scan(&bronzeErr))
	require.Contains(t, bronzeErr, "does not hash to its stored hash")
	for _, r := range readBronze(t, lake, tn) {
		require.NotEqual(t, int64(farSeq), r.Seq, "the forged journal row is in bronze")
	}
	// Every other event is in bronze exactly once (verifyLake would count the
	// forged journal row as missing, so count here). Whether the events
	// appended after the forgery (the dead letters' materialize.skipped) come
	// before or after farSeq depends on how the append path finds the head.
	var events int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1 AND seq <> $2`, tn, farSeq).Scan(&events))
	seen := map[int64]bool{}
	for _, r := range readBronze(t, lake, tn) {
		require.False(t, seen[r.Seq], "event %d twice in bronze", r.Seq)
		seen[r.Seq] = true
	}
	require.Len(t, seen, events)
}

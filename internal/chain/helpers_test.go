package chain_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
)

type bundle struct {
	pool *pgxpool.Pool
	key  *keys.Key
	db   *testdb.DB
}

// setup gives a fresh, initialised deployment.
func setup(t testing.TB) *bundle {
	t.Helper()
	d := testkit.NewDeploymentNamed(t)
	return &bundle{pool: d.Pool, key: d.Key, db: d.DB}
}

func (b *bundle) tenant(t testing.TB, name string) uuid.UUID {
	t.Helper()
	tn, created, err := tenant.Create(context.Background(), b.pool, b.key, name)
	require.NoError(t, err)
	require.True(t, created)
	return tn.ID
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// submit builds a claim.submitted with a random "ciphertext" and data key.
func submit(t testing.TB, artifact string, version int, writer, provenance string) journal.Event {
	t.Helper()
	body := make([]byte, 64)
	_, _ = rand.Read(body)
	dek := make([]byte, 32)
	_, _ = rand.Read(dek)
	return submitWith(t, artifact, version, writer, provenance, body, dek)
}

func submitWith(t testing.TB, artifact string, version int, writer, provenance string, body, dek []byte) journal.Event {
	t.Helper()
	ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
		ArtifactID: artifact, Version: version, WorkareaID: "wa-1", Writer: writer, Principal: "team",
		Provenance: provenance, PlaintextDigest: digest([]byte("plain " + artifact)), CiphertextDigest: digest(body),
	}, body, dek)
	require.NoError(t, err)
	return ev
}

func promote(artifact string, version int, by string) journal.Event {
	return journal.MustNew(journal.ClaimPromoted{ArtifactID: artifact, Version: version, By: by})
}

// checkChain reads tenant's whole chain and asserts it is gapless, linked,
// hash- and signature-valid, that the head matches, and that its outbox
// rows are in seq order.
func checkChain(t testing.TB, ctx context.Context, pool *pgxpool.Pool, k *keys.Key, tn uuid.UUID) int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at
	                                FROM oml.journal WHERE tenant_id = $1 ORDER BY seq`, tn)
	require.NoError(t, err)
	defer rows.Close()
	var prev chain.Hash
	var n uint64
	var lastAt int64
	for rows.Next() {
		var r chain.Record
		var seq int64
		var ph, h []byte
		require.NoError(t, rows.Scan(&seq, &ph, &h, &r.Signature, &r.KeyID, &r.EventType, &r.Payload, &r.RecordedAt))
		r.TenantID, r.Seq = tn, uint64(seq)
		copy(r.PrevHash[:], ph)
		copy(r.Hash[:], h)
		n++
		require.Equal(t, n, r.Seq, "tenant %s: gap before seq %d", tn, r.Seq)
		require.Equal(t, prev, r.PrevHash, "tenant %s seq %d: prev_hash does not link", tn, r.Seq)
		require.NoError(t, r.Check(k.Public()))
		require.GreaterOrEqual(t, r.RecordedAt.UnixMicro(), lastAt, "recorded_at went backwards")
		lastAt = r.RecordedAt.UnixMicro()
		prev = r.Hash
	}
	require.NoError(t, rows.Err())
	if n > 0 {
		h, ok, err := chain.ReadHead(ctx, pool, tn)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, n, h.Seq)
		require.Equal(t, prev, h.Hash)
	}
	// Outbox order equals seq order within the tenant, and every event has
	// its bronze row.
	var bad, bronze int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE journal_seq < prev_jseq),
		       count(*) FILTER (WHERE target = 'bronze.events')
		  FROM (SELECT journal_seq, target, lag(journal_seq, 1, 0::bigint) OVER (ORDER BY seq) AS prev_jseq
		          FROM oml.outbox WHERE tenant_id = $1) o`, tn).Scan(&bad, &bronze))
	require.Zero(t, bad, "tenant %s: outbox order differs from journal seq order", tn)
	require.Equal(t, int(n), bronze, "tenant %s: one bronze.events row per event", tn)
	// The claim state and the outbox are exactly what the chain implies.
	require.NoError(t, journal.CheckFold(ctx, pool, tn))
	return int(n)
}

func name(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

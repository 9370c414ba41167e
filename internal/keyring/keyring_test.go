package keyring_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/witness"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

type fx struct {
	pool     *pgxpool.Pool
	old, new *keys.Key
	acme     uuid.UUID
}

func setup(t *testing.T) *fx {
	t.Helper()
	d := testkit.NewDeploymentNamed(t, "acme")
	next, err := keys.Generate()
	require.NoError(t, err)
	return &fx{pool: d.Pool, old: d.Key, new: next, acme: d.Tenants[0]}
}

// promote appends one submitted claim to acme's chain, signed by s.
func (f *fx) promote(t *testing.T, s chain.Signer, artifact string) error {
	t.Helper()
	body := make([]byte, 32)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	dek := make([]byte, 32)
	_, _ = rand.Read(dek)
	ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: artifact, Version: 1, WorkareaID: "wa", Writer: "alice",
		Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:])}, body, dek)
	require.NoError(t, err)
	_, err = chain.Append(context.Background(), f.pool, s, f.acme, ev)
	return err
}

func (f *fx) verify(t *testing.T) chainverify.Report {
	t.Helper()
	rep, err := chainverify.VerifyDB(context.Background(), f.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	return rep
}

// forge appends, behind the application's back, a correctly linked event
// on acme's chain signed by k: what someone holding a stolen key could do.
func (f *fx) forge(t *testing.T, k *keys.Key) int64 {
	t.Helper()
	ctx := context.Background()
	var seq int64
	var prev []byte
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT seq, hash FROM oml.journal WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1`, f.acme).Scan(&seq, &prev))
	ev := journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "thief"})
	env := chain.Envelope{TenantID: f.acme, Seq: uint64(seq + 1), EventType: string(ev.Type), RecordedAt: time.Now().UTC().Truncate(time.Microsecond),
		KeyID: k.KeyID(), PayloadDigest: chain.PayloadDigest(ev.Payload)}
	copy(env.PrevHash[:], prev)
	enc, err := env.Encode()
	require.NoError(t, err)
	h := chain.EnvelopeHash(enc)
	_, err = f.pool.Exec(ctx, `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, f.acme, seq+1, prev, h[:], k.Sign(enc), k.KeyID(), string(ev.Type), ev.Payload, env.RecordedAt)
	require.NoError(t, err)
	return seq + 1
}

// TestKeyLifecycle_RotateAppendRevoke_VerifiesAcrossItAndRefusesTheOldKey:
// rotate, append with the new key, revoke the old: every chain verifies
// end to end (old-key events before the revocation stay valid); the append
// path refuses the revoked key; the list shows both keys and the
// revocation.
func TestKeyLifecycle_RotateAppendRevoke_VerifiesAcrossItAndRefusesTheOldKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	require.NoError(t, f.promote(t, f.old, "before-rotation"))

	seq, err := keyring.Rotate(ctx, f.pool, f.old, f.new)
	require.NoError(t, err)
	require.Positive(t, seq)
	require.NoError(t, f.promote(t, f.new, "after-rotation"))
	require.NoError(t, f.promote(t, f.old, "old-key-still-valid"))

	res, err := keyring.Revoke(ctx, f.pool, f.new, f.old.KeyID(), "ops", "laptop lost")
	require.NoError(t, err)
	require.Equal(t, 1, res.Chains)
	require.Equal(t, f.new.KeyID(), res.SignedBy)

	err = f.promote(t, f.old, "after-revocation")
	require.ErrorContains(t, err, "revoked")
	require.NoError(t, f.promote(t, f.new, "new-key-goes-on"))

	rep := f.verify(t)
	require.Empty(t, rep.Findings, "a chain verifies end to end across a rotation and a revocation")

	ks, err := keyring.List(ctx, f.pool)
	require.NoError(t, err)
	require.Len(t, ks, 2)
	require.Equal(t, "root", ks[0].Role)
	require.NotNil(t, ks[0].RevokedSeq)
	require.Equal(t, res.ProviderSeq, *ks[0].RevokedSeq)
	require.Equal(t, keyring.RoleRotated, ks[1].Role)
	require.Nil(t, ks[1].RevokedSeq)
}

// TestKeyLifecycle_StolenKeyAfterRevocation_IsARevokedKeyFinding: an event
// signed by the revoked key after the revocation, inserted behind the
// application's back, is found with its own reason at its seq; the events
// the same key signed before stay valid.
func TestKeyLifecycle_StolenKeyAfterRevocation_IsARevokedKeyFinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	require.NoError(t, f.promote(t, f.old, "a"))
	_, err := keyring.Rotate(ctx, f.pool, f.old, f.new)
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, f.pool, f.new, f.old.KeyID(), "ops", "leak suspected")
	require.NoError(t, err)

	bad := f.forge(t, f.old)
	rep := f.verify(t)
	require.Len(t, rep.Findings, 1, "%+v", rep.Findings)
	fd := rep.Findings[0]
	require.Equal(t, f.acme, fd.Tenant)
	require.Equal(t, bad, fd.Seq)
	require.Equal(t, chainverify.ReasonRevokedKey, fd.Reason)
	require.Equal(t, f.old.KeyID(), fd.Evidence["key_id"])
}

// TestKeyRevoke_RefusedCases: a key cannot revoke itself, a key never
// issued cannot be revoked, a revoked key cannot be revoked again.
func TestKeyRevoke_RefusedCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	_, err := keyring.Revoke(ctx, f.pool, f.old, f.old.KeyID(), "ops", "x")
	require.ErrorIs(t, err, keyring.ErrRefused)
	require.ErrorContains(t, err, "cannot revoke itself")

	_, err = keyring.Revoke(ctx, f.pool, f.old, f.new.KeyID(), "ops", "x")
	require.ErrorIs(t, err, keyring.ErrRefused)
	require.ErrorContains(t, err, "never issued")

	_, err = keyring.Rotate(ctx, f.pool, f.old, f.new)
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, f.pool, f.new, f.old.KeyID(), "ops", "x")
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, f.pool, f.new, f.old.KeyID(), "ops", "again")
	require.ErrorIs(t, err, keyring.ErrRefused)
	require.ErrorContains(t, err, "already revoked")
	_, err = keyring.Rotate(ctx, f.pool, f.new, f.new)
	require.ErrorIs(t, err, keyring.ErrRefused)
}

// TestKeyLifecycle_WitnessByTheRevokedKey_TrustedOnlyUpToTheRevocation: a
// head the old key signed at or below the chain's point recorded in the
// revocation stays a valid witness; one it signs above that point (a thief
// vouching for a forged tail) is not trusted, and says why.
func TestKeyLifecycle_WitnessByTheRevokedKey_TrustedOnlyUpToTheRevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	require.NoError(t, f.promote(t, f.old, "a"))
	var point int64
	var hash []byte
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, f.acme).Scan(&point, &hash))
	_, err := keyring.Rotate(ctx, f.pool, f.old, f.new)
	require.NoError(t, err)
	_, err = keyring.Revoke(ctx, f.pool, f.new, f.old.KeyID(), "ops", "leak")
	require.NoError(t, err)

	lake := store.NewMem()
	before := &witness.Head{Version: 1, Tenant: f.acme, Seq: point, Hash: hex.EncodeToString(hash), Time: time.Now().UTC()}
	require.NoError(t, before.Sign(f.old))
	_, err = witness.Publish(ctx, lake, before)
	require.NoError(t, err)
	trusted, err := chainverify.IssuedKeys(ctx, f.pool)
	require.NoError(t, err)
	newest, bad, err := witness.Newest(ctx, lake, &f.acme, trusted)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Equal(t, point, newest[f.acme].Seq, "a head the old key signed before its revocation still vouches")

	after := &witness.Head{Version: 1, Tenant: f.acme, Seq: point + 5, Hash: hex.EncodeToString(hash), Time: time.Now().UTC()}
	require.NoError(t, after.Sign(f.old))
	_, err = witness.Publish(ctx, lake, after)
	require.NoError(t, err)
	newest, bad, err = witness.Newest(ctx, lake, &f.acme, trusted)
	require.NoError(t, err)
	require.Len(t, bad, 1, "a head the revoked key signed past its point is not trusted")
	require.Equal(t, point, newest[f.acme].Seq, "and does not hide the valid one below it")
}

package chainverify_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/tenant"
)

// The provider chain of newDeployment: seq 1 the root key.issued, 2–4
// the three tenants' tenant.created.

func rootTrusted(t *testing.T, d *deployment, lookup func(string, uuid.UUID, int64) ([]byte, bool)) bool {
	t.Helper()
	_, ok := lookup(d.key.KeyID(), uuid.Nil, 1)
	return ok
}

func cachedLookup(t *testing.T, d *deployment, c *chainverify.ProviderTrustCache) func(string, uuid.UUID, int64) ([]byte, bool) {
	t.Helper()
	trusted, err := c.IssuedKeys(context.Background(), d.pool)
	require.NoError(t, err)
	return func(id string, tn uuid.UUID, seq int64) ([]byte, bool) { return trusted(id, tn, seq) }
}

func uncachedLookup(t *testing.T, d *deployment) func(string, uuid.UUID, int64) ([]byte, bool) {
	t.Helper()
	trusted, err := chainverify.IssuedKeys(context.Background(), d.pool)
	require.NoError(t, err)
	return func(id string, tn uuid.UUID, seq int64) ([]byte, bool) { return trusted(id, tn, seq) }
}

func TestProviderTrustCache_ChainGrows_TheNewHeadIsVerifiedAndTrustedNext(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var c chainverify.ProviderTrustCache
	require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
	require.EqualValues(t, 4, c.Verified().Seq)
	_, _, err := tenant.Create(context.Background(), d.pool, d.key, "delta")
	require.NoError(t, err)
	require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
	require.EqualValues(t, 5, c.Verified().Seq)
}

// A key.issued edited after the cache verified the chain: the chain no
// longer hashes to the verified head, the held-back signatures are
// verified after all, and the key is not trusted, as without the cache.
func TestProviderTrustCache_KeyIssuedEventEditedAfterTheFirstRead_IsNotTrusted(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var c chainverify.ProviderTrustCache
	require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant)
	})
	require.False(t, rootTrusted(t, d, cachedLookup(t, d, &c)), "an edited key.issued was trusted through the cache")
	require.False(t, rootTrusted(t, d, uncachedLookup(t, d)))
	require.EqualValues(t, 4, c.Verified().Seq, "a chain with a finding became the verified head")
}

// A new provider event with a bad signature, past the verified head: it
// is verified (the cache skips only what this process verified) and the
// chain's head does not become the verified one.
func TestProviderTrustCache_BadSignaturePastTheVerifiedHead_IsVerified(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var c chainverify.ProviderTrustCache
	cachedLookup(t, d, &c)
	_, _, err := tenant.Create(context.Background(), d.pool, d.key, "delta")
	require.NoError(t, err)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET signature = set_byte(signature, 0, get_byte(signature, 0) # 1) WHERE tenant_id = $1 AND seq = 5`, chainverify.ProviderTenant)
	})
	cachedLookup(t, d, &c)
	require.EqualValues(t, 4, c.Verified().Seq)
}

// A provider chain that lost its tail since the cache verified it (a
// failover) ends before the verified head: every held-back signature is
// verified and the shorter chain's head is the verified one.
func TestProviderTrustCache_ChainEndsBeforeTheVerifiedHead_VerifiedInFull(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var c chainverify.ProviderTrustCache
	cachedLookup(t, d, &c)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq = 4`, chainverify.ProviderTenant)
	})
	require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
	require.EqualValues(t, 3, c.Verified().Seq)
}

// What the cache trades: an edit of the signature bytes alone, below the
// head this process verified, is not seen by a later read through it (the
// event is bit for bit what was verified otherwise), while a full read
// refuses the key. oml chain verify and the doctor's chain scrub verify
// every signature and report it; the lake writer, restarted, reads in full.
func TestProviderTrustCache_SignatureOnlyEditBelowTheVerifiedHead_IsNotVerifiedAgain(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var c chainverify.ProviderTrustCache
	cachedLookup(t, d, &c)
	d.tamper(t, func(tx pgx.Tx) {
		mustExec(t, tx, `UPDATE oml.journal SET signature = set_byte(signature, 0, get_byte(signature, 0) # 1) WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant)
	})
	require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
	require.False(t, rootTrusted(t, d, uncachedLookup(t, d)))
}

package chainverify_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// countingPool counts the reads of the provider chain's events (journal
// pages), through the pool and through the transactions it begins.
type countingPool struct {
	*pgxpool.Pool
	pages *atomic.Int64
}

// countPage counts sql if it reads a page of a chain's events
// (journalPageRead's query).
func countPage(pages *atomic.Int64, sql string) {
	if strings.Contains(sql, "seq > $2 ORDER BY seq") {
		pages.Add(1)
	}
}

func (p countingPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	countPage(p.pages, sql)
	return p.Pool.Query(ctx, sql, args...)
}

func (p countingPool) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.Pool.BeginTx(ctx, o)
	return countingTx{Tx: tx, pages: p.pages}, err
}

type countingTx struct {
	pgx.Tx
	pages *atomic.Int64
}

func (t countingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	countPage(t.pages, sql)
	return t.Tx.Query(ctx, sql, args...)
}

// An unchanged provider chain is not read again: the cache compares its
// fingerprint and returns the keys the last read found. A new event
// changes the fingerprint, and the chain is read (and the new key
// trusted) as before.
func TestProviderTrustCache_UnchangedChain_IsNotReadAgain_AGrownOneIs(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	var pages atomic.Int64
	q := countingPool{Pool: d.pool, pages: &pages}
	var c chainverify.ProviderTrustCache
	lookup := func() bool {
		trusted, err := c.IssuedKeys(context.Background(), q)
		require.NoError(t, err)
		_, ok := trusted(d.key.KeyID(), uuid.Nil, 1)
		return ok
	}
	require.True(t, lookup())
	require.Positive(t, pages.Load(), "the first call read no page of the chain")
	pages.Store(0)
	require.True(t, lookup())
	require.True(t, lookup())
	require.Zero(t, pages.Load(), "an unchanged chain was read again")
	_, _, err := tenant.Create(context.Background(), d.pool, d.key, "delta")
	require.NoError(t, err)
	require.True(t, lookup())
	require.Positive(t, pages.Load(), "a grown chain was not read")
	require.EqualValues(t, 5, c.Verified().Seq)
}

// Every column of a provider event is in the fingerprint: an edit of any
// of them (but the signature, which the hash does not cover: the test
// above this one) after the cache read the chain is noticed, the chain is
// read and checked again, and the edited key.issued is not trusted, as
// without the cache.
func TestProviderTrustCache_AnyColumnEditedAfterTheFirstRead_IsNoticed(t *testing.T) {
	t.Parallel()
	for col, set := range map[string]string{
		"seq":         `seq = 100`,
		"prev_hash":   `prev_hash = set_byte(prev_hash, 0, get_byte(prev_hash, 0) # 1)`,
		"hash":        `hash = set_byte(hash, 0, get_byte(hash, 0) # 1)`,
		"key_id":      `key_id = key_id || 'x'`,
		"event_type":  `event_type = event_type || 'x'`,
		"payload":     `payload = payload || '\x20'::bytea`,
		"recorded_at": `recorded_at = recorded_at + interval '1 microsecond'`,
	} {
		t.Run(col, func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			var c chainverify.ProviderTrustCache
			require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
			require.True(t, rootTrusted(t, d, cachedLookup(t, d, &c)))
			d.tamper(t, func(tx pgx.Tx) {
				mustExec(t, tx, `UPDATE oml.journal SET `+set+` WHERE tenant_id = $1 AND seq = 1`, chainverify.ProviderTenant)
			})
			require.False(t, rootTrusted(t, d, cachedLookup(t, d, &c)), "an edited %s was not noticed through the cache", col)
			require.False(t, rootTrusted(t, d, uncachedLookup(t, d)))
		})
	}
}

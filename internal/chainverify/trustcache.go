package chainverify

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/witness"
)

// ProviderTrustCache is IssuedKeys for a process that reads the provider
// chain's keys again and again: the lake writer's start-up fork check, its
// periodic fork checks and every witness publication. The provider chain
// holds one event per tenant, so each full read verified about as many
// signatures as there are tenants (about 4% of a 10,000-tenant drain's
// CPU).
//
// The first call verifies the chain in full. A later one still reads and
// hash-checks the chain from its genesis (it defines the keys), but holds
// back the signatures up to the head an earlier call of this same process
// verified (Options.ProviderSigned with that head) and drops them once the
// chain hashes to that head: those events are then bit for bit what was
// verified, since the envelope covers every stored field but the
// signature. If the chain ends, breaks or hashes otherwise before it,
// every held-back signature is verified after all. The head trusted is
// never one read from the database (an oml.chain_checkpoints row the
// owner can edit), only one this process verified.
//
// Reading the chain again was itself the cost at scale: a witness
// publication after every batch read and parsed the whole chain (8% of
// the lake writer's CPU at 10,000 tenants, and PostgreSQL sent it every
// row each time). So a read taken in a snapshot of its own (a Querier
// that can begin a transaction: a pool) also asks PostgreSQL for the
// chain's fingerprint in that snapshot (providerFingerprintSQL: every
// event's seq, row version and stored hash), and a later call whose
// fingerprint is the same returns the keys that read found without
// reading the chain again. The same fingerprint means the same rows:
// an UPDATE of any column, or a DELETE and an INSERT, is a new row
// version by a later transaction (another xmin), and an added or removed
// event changes the seqs. The stored hash is there for a history that
// moved (a failover, a restore), where a transaction id can be used
// again: an event written anew at the same seq by such a transaction
// hashes otherwise unless it is the same event. What this trades, like
// the held-back signatures: a row written in such a transaction with the
// very xmin, seq and stored hash of the one read but other content is
// not read again until the process restarts; oml chain verify and the
// doctor's chain scrub read every row. Safe for concurrent use; the zero
// value is ready.
type ProviderTrustCache struct {
	mu       sync.Mutex
	verified *Head
	// read is the last read's result and the fingerprint of the rows it
	// read (nil: none yet, or the Querier could not give one snapshot).
	read *trustRead
}

// trustRead is what one read of the provider chain found, and the
// fingerprint of the rows it found it in.
type trustRead struct {
	fingerprint []byte
	lookup      witness.KeyLookup
}

// providerFingerprintSQL is the provider chain's fingerprint: the SHA-256
// of its events' seq, row version (xmin: the transaction that wrote it)
// and stored hash, in seq order (ProviderTrustCache says why these).
// About 1.3 µs an event in PostgreSQL, where reading the events here cost
// 7–11 µs (BenchmarkProviderTrustCache). A chain of no events has the
// fingerprint of nothing.
const providerFingerprintSQL = `
SELECT sha256(coalesce(string_agg(
         int8send(seq) || int8send(xmin::text::bigint)
      || int4send(octet_length(hash)) || hash, ''::bytea ORDER BY seq), ''::bytea))
FROM oml.journal WHERE tenant_id = $1`

// txBeginner is a Querier that can take a snapshot of its own (a pool).
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// issued is c's IssuedKeys, or IssuedKeys (a full verification of the
// provider chain) when c is nil.
func (c *ProviderTrustCache) issued(ctx context.Context, q Querier) (witness.KeyLookup, error) {
	if c == nil {
		return IssuedKeys(ctx, q)
	}
	return c.IssuedKeys(ctx, q)
}

// IssuedKeys is chainverify.IssuedKeys through the cache.
func (c *ProviderTrustCache) IssuedKeys(ctx context.Context, q Querier) (witness.KeyLookup, error) {
	c.mu.Lock()
	signed, last := c.verified, c.read
	c.mu.Unlock()
	b, ok := q.(txBeginner)
	if !ok {
		return c.readKeys(ctx, q, signed)
	}
	if last != nil {
		fp, err := providerFingerprint(ctx, q)
		if err != nil {
			return nil, err
		}
		if string(fp) == string(last.fingerprint) {
			return last.lookup, nil
		}
	}
	// The rows and their fingerprint in one snapshot, so the fingerprint
	// is of the rows the keys come from.
	tx, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("read the provider chain: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	fp, err := providerFingerprint(ctx, tx)
	if err != nil {
		return nil, err
	}
	lookup, err := c.readKeys(ctx, tx, signed)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.read = &trustRead{fingerprint: fp, lookup: lookup}
	c.mu.Unlock()
	return lookup, nil
}

// readKeys reads and checks the provider chain (the held-back signatures
// up to signed, the head an earlier call verified) and, if it verified to
// its end, makes its head the verified one.
func (c *ProviderTrustCache) readKeys(ctx context.Context, q Querier, signed *Head) (witness.KeyLookup, error) {
	keys, revoked, head, err := providerTrustHead(ctx, q, signed)
	if err != nil {
		return nil, err
	}
	if head != nil {
		// The chain as read verified to its end, through the held-back
		// signatures or in full: its head is verified in turn.
		c.mu.Lock()
		c.verified = head
		c.mu.Unlock()
	}
	return KeyLookup(keys, revoked), nil
}

// providerFingerprint reads the provider chain's fingerprint
// (providerFingerprintSQL).
func providerFingerprint(ctx context.Context, q Querier) ([]byte, error) {
	var fp []byte
	if err := q.QueryRow(ctx, providerFingerprintSQL, ProviderTenant).Scan(&fp); err != nil {
		return nil, fmt.Errorf("read the provider chain's fingerprint: %w", err)
	}
	return fp, nil
}

// Verified is the provider head the next call trusts (nil: none yet).
func (c *ProviderTrustCache) Verified() *Head {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified
}

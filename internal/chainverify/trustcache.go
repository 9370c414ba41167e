package chainverify

import (
	"context"
	"sync"

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
// owner can edit), only one this process verified. Safe for concurrent
// use; the zero value is ready.
type ProviderTrustCache struct {
	mu       sync.Mutex
	verified *Head
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
	signed := c.verified
	c.mu.Unlock()
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

// Verified is the provider head the next call trusts (nil: none yet).
func (c *ProviderTrustCache) Verified() *Head {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified
}

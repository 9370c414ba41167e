package chainverify

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// providerOnly is the provider chain of f alone, as IssuedKeys reads it.
func (f *fixture) providerOnly() []*Event { return f.chains[ProviderTenant] }

// The provider trust read of a lake writer (ProviderTrustCache) keeps
// nothing per provider event while it reads the chain: neither a held-back
// signature per event below the head verified before nor a tenant.created
// reference per tenant. Without KeysOnly the same read holds both, one per
// tenant, until the chain ends.
func TestVerify_KeysOnlyBelowTheVerifiedHead_HoldsNothingPerEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 7, 300, 1)
	evs := f.providerOnly()
	last := evs[len(evs)-1]
	head := &Head{Seq: last.Seq, Hash: slices.Clone(last.Hash)}
	for _, keysOnly := range []bool{true, false} {
		e := newEngine(Options{ProviderSigned: head, KeysOnly: keysOnly})
		maxHeld, maxRefs := 0, 0
		for _, ev := range evs {
			cp := *ev
			require.NoError(t, e.handle(context.Background(), &cp))
			if e.cur != nil {
				maxHeld = max(maxHeld, len(e.cur.held))
			}
			maxRefs = max(maxRefs, len(e.refs))
		}
		require.NoError(t, e.finishStream(context.Background()))
		e.stop()
		if keysOnly {
			require.Zero(t, maxHeld, "signatures held back with KeysOnly")
			require.Zero(t, maxRefs, "tenant.created references kept with KeysOnly")
		} else {
			require.Equal(t, len(evs)-1, maxHeld) // the last one confirms the head
			require.Equal(t, 300, maxRefs)
		}
	}
}

// A provider chain that does not reach the verified head intact ends a
// KeysOnly run with ErrProviderUnconfirmed (the caller verifies it again
// in full), never with keys trusted on the strength of the head.
func TestVerify_KeysOnlyChainNotReachingTheVerifiedHead_Unconfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8, 20, 1)
	evs := f.providerOnly()
	last := evs[len(evs)-1]
	src := func(evs []*Event) func(yield func(*Event, error) bool) {
		return func(yield func(*Event, error) bool) {
			for _, ev := range evs {
				cp := *ev
				if !yield(&cp, nil) {
					return
				}
			}
		}
	}
	t.Run("ends before it", func(t *testing.T) {
		head := &Head{Seq: last.Seq + 1, Hash: slices.Clone(last.Hash)}
		_, err := Verify(context.Background(), src(evs), Options{ProviderSigned: head, KeysOnly: true})
		require.ErrorIs(t, err, ErrProviderUnconfirmed)
	})
	t.Run("hashes otherwise", func(t *testing.T) {
		head := &Head{Seq: last.Seq, Hash: make([]byte, 32)}
		_, err := Verify(context.Background(), src(evs), Options{ProviderSigned: head, KeysOnly: true})
		require.ErrorIs(t, err, ErrProviderUnconfirmed)
	})
	t.Run("reaches it", func(t *testing.T) {
		head := &Head{Seq: last.Seq, Hash: slices.Clone(last.Hash)}
		sum, err := Verify(context.Background(), src(evs), Options{ProviderSigned: head, KeysOnly: true})
		require.NoError(t, err)
		require.Contains(t, sum.Keys, f.keyID)
		require.Empty(t, sum.Created)
	})
}

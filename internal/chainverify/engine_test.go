package chainverify

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

type runResult struct {
	sum     Summary
	results map[uuid.UUID]ChainResult
}

func run(t *testing.T, f *fixture, opts Options) runResult {
	t.Helper()
	var mu sync.Mutex
	res := map[uuid.UUID]ChainResult{}
	opts.OnChain = func(r ChainResult) {
		mu.Lock()
		defer mu.Unlock()
		_, dup := res[r.Tenant]
		require.False(t, dup, "OnChain called twice for %s", r.Tenant)
		res[r.Tenant] = r
	}
	sum, err := Verify(context.Background(), f.events(), opts)
	require.NoError(t, err)
	return runResult{sum: sum, results: res}
}

// requireOnly asserts exactly one finding, for tenant at seq with reason,
// and that every other chain verified clean to its head.
func requireOnly(t *testing.T, f *fixture, r runResult, tenant uuid.UUID, seq int64, reason Reason) {
	t.Helper()
	require.Len(t, r.sum.Findings, 1, "findings: %v", r.sum.Findings)
	got := r.sum.Findings[0]
	require.Equal(t, tenant, got.Tenant, "finding: %v", got)
	require.Equal(t, seq, got.Seq, "finding: %v", got)
	require.Equal(t, reason, got.Reason, "finding: %v", got)
	require.Len(t, r.results, len(f.order))
	for _, id := range f.order {
		if id == tenant {
			continue
		}
		cr := r.results[id]
		require.Nil(t, cr.Finding, "chain %s", id)
		chain := f.chains[id]
		require.Equal(t, chain[len(chain)-1].Seq, cr.Last.Seq)
		require.Equal(t, chain[len(chain)-1].Hash, cr.Last.Hash)
	}
}

func TestVerify_CleanDeploymentHasNoFindings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 5, 150)
	for _, strict := range []bool{false, true} {
		var p Progress
		r := run(t, f, Options{Strict: strict, Workers: 2, BatchSize: 64, Progress: &p})
		require.Empty(t, r.sum.Findings)
		require.Equal(t, len(f.order), r.sum.Chains)
		require.EqualValues(t, f.count(), r.sum.Events)
		require.EqualValues(t, f.count(), p.Events.Load())
		require.EqualValues(t, f.count(), p.Signatures.Load())
		for _, id := range f.order {
			chain := f.chains[id]
			require.Equal(t, chain[len(chain)-1].Seq, r.results[id].Last.Seq)
			require.Equal(t, chain[len(chain)-1].Hash, r.results[id].Last.Hash)
		}
	}
}

func TestVerify_EmptyStreamIsEmptySummary(t *testing.T) {
	t.Parallel()
	sum, err := Verify(context.Background(), func(func(*Event, error) bool) {}, Options{})
	require.NoError(t, err)
	require.Zero(t, sum.Chains)
}

func TestVerify_TamperInMemory(t *testing.T) {
	t.Parallel()
	other, _, _ := ed25519.GenerateKey(nil)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	_ = other
	cases := []struct {
		name   string
		tamper func(f *fixture) (uuid.UUID, int64, Reason)
	}{
		{"payload byte changed", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(1)
			f.chains[t][40].Payload[5] ^= 1
			return t, 41, ReasonHashMismatch
		}},
		{"stored hash changed", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(0)
			f.chains[t][9].Hash[0] ^= 0x80
			return t, 10, ReasonHashMismatch
		}},
		{"signature changed", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(2)
			f.chains[t][70].Signature[3] ^= 1
			return t, 71, ReasonBadSignature
		}},
		{"signature truncated", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(2)
			f.chains[t][70].Signature = f.chains[t][70].Signature[:63]
			return t, 71, ReasonBadSignature
		}},
		{"event deleted in the middle", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(1)
			c := f.chains[t]
			f.chains[t] = append(c[:50:50], c[51:]...)
			return t, 51, ReasonSeqGap
		}},
		{"two events swapped", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(0)
			c := f.chains[t]
			c[20], c[21] = c[21], c[20]
			c[20].Seq, c[21].Seq = 21, 22
			return t, 21, ReasonBrokenLink
		}},
		{"edited event re-signed with a never-issued key", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(1)
			ev := f.chains[t][30]
			ev.Payload = []byte(`{"forged":true}`)
			ev.KeyID = KeyID(otherPriv.Public().(ed25519.PublicKey))
			f.seal(ev, otherPriv)
			// Re-link the rest, as a thorough forger would.
			for _, next := range f.chains[t][31:] {
				next.PrevHash = f.chains[t][next.Seq-2].Hash
				f.seal(next, f.priv)
			}
			return t, 31, ReasonUnknownKey
		}},
		{"edited event re-signed with the real key but a bad signature elsewhere earlier", func(f *fixture) (uuid.UUID, int64, Reason) {
			// The first bad event wins even when the later one is found
			// first by the in-order link checker.
			t := f.tenant(2)
			f.chains[t][5].Signature[10] ^= 4
			f.chains[t][100].Payload[0] ^= 1
			return t, 6, ReasonBadSignature
		}},
		{"genesis points at another tenant's provider event", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(0)
			wrong := f.chains[ProviderTenant][2] // created some other tenant
			if wrong.Payload != nil && string(wrong.Payload) == "" {
				panic("unreachable")
			}
			g := f.chains[t][0]
			g.Payload = mustJSON(map[string]any{"provider_seq": wrong.Seq, "provider_hash": hex.EncodeToString(wrong.Hash)})
			f.seal(g, f.priv)
			for _, next := range f.chains[t][1:] {
				next.PrevHash = f.chains[t][next.Seq-2].Hash
				f.seal(next, f.priv)
			}
			return t, 1, ReasonBadGenesis
		}},
		{"genesis with a wrong provider hash", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(2)
			g := f.chains[t][0]
			g.Payload = []byte(`{"provider_seq":2,"provider_hash":"` + hex.EncodeToString(make([]byte, 32)) + `"}`)
			f.seal(g, f.priv)
			return t, 1, ReasonBadGenesis
		}},
		{"chain not starting with a genesis", func(f *fixture) (uuid.UUID, int64, Reason) {
			t := f.tenant(1)
			g := f.chains[t][0]
			g.EventType = "claim.submitted"
			f.seal(g, f.priv)
			return t, 1, ReasonBadGenesis
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 2, 3, 120)
			tenant, seq, reason := tc.tamper(f)
			for _, strict := range []bool{false, true} {
				r := run(t, f, Options{Strict: strict, BatchSize: 32})
				requireOnly(t, f, r, tenant, seq, reason)
			}
		})
	}
}

func TestVerify_ProviderChainBrokenTaintsWhatDependsOnIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3, 3, 20)
	// The tenant.created at provider seq 3 gets a bad signature: neither the
	// tenant it created nor any tenant created after it can be trusted.
	f.chains[ProviderTenant][2].Signature[0] ^= 1
	r := run(t, f, Options{})
	var created uuid.UUID
	require.NoError(t, created.UnmarshalText([]byte(
		mustTenantID(t, f.chains[ProviderTenant][2].Payload))))
	byTenant := map[uuid.UUID]Finding{}
	for _, fd := range r.sum.Findings {
		byTenant[fd.Tenant] = fd
	}
	require.Equal(t, ReasonBadSignature, byTenant[ProviderTenant].Reason)
	require.EqualValues(t, 3, byTenant[ProviderTenant].Seq)
	require.Equal(t, ReasonBadGenesis, byTenant[created].Reason)
	require.EqualValues(t, 1, byTenant[created].Seq)
	var later uuid.UUID
	require.NoError(t, later.UnmarshalText([]byte(
		mustTenantID(t, f.chains[ProviderTenant][3].Payload))))
	require.Equal(t, ReasonBadGenesis, byTenant[later].Reason)
	require.Len(t, r.sum.Findings, 3, "the tenant created before the bad event stays clean")
}

func mustTenantID(t *testing.T, payload []byte) string {
	id, err := parseTenantCreated(payload)
	require.NoError(t, err)
	return id.String()
}

func TestVerify_MissingProviderChainMakesEveryKeyUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4, 2, 5)
	f.order = f.order[1:]
	r := run(t, f, Options{})
	require.Len(t, r.sum.Findings, 3)
	require.Equal(t, ReasonBadGenesis, r.sum.Findings[0].Reason)
	require.Equal(t, ProviderTenant, r.sum.Findings[0].Tenant)
	for _, fd := range r.sum.Findings[1:] {
		require.Equal(t, ReasonBadGenesis, fd.Reason) // no tenant.created to point at
	}
}

func TestVerify_RootKeyPin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5, 1, 3)
	r := run(t, f, Options{RootKeyID: f.keyID})
	require.Empty(t, r.sum.Findings)
	r = run(t, f, Options{RootKeyID: "00112233445566778899aabbccddeeff"})
	require.Equal(t, ReasonBadGenesis, r.sum.Findings[0].Reason)
	require.Equal(t, ProviderTenant, r.sum.Findings[0].Tenant)
}

func TestVerify_ResumeFromTrustedHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 6, 2, 100)
	t0 := f.tenant(0)
	from := f.chains[t0][59]
	// The source only yields events after the trusted head for t0.
	f.chains[t0] = f.chains[t0][60:]
	start := func(id uuid.UUID) (Head, bool) {
		if id == t0 {
			return Head{Seq: from.Seq, Hash: from.Hash}, true
		}
		return Head{}, false
	}
	r := run(t, f, Options{Start: start})
	require.Empty(t, r.sum.Findings)
	require.Equal(t, int64(60), r.results[t0].From.Seq)
	require.Equal(t, int64(100), r.results[t0].Last.Seq)
	require.EqualValues(t, 40, r.results[t0].Events)

	// A wrong trusted hash is a broken link at the first event after it.
	bad := func(id uuid.UUID) (Head, bool) {
		if id == t0 {
			return Head{Seq: from.Seq, Hash: make([]byte, 32)}, true
		}
		return Head{}, false
	}
	r = run(t, f, Options{Start: bad})
	requireOnly(t, f, r, t0, 61, ReasonBrokenLink)
}

func TestVerify_OutOfOrderSourceIsAnError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 7, 2, 3)
	f.order[1], f.order[2] = f.order[2], f.order[1]
	_, err := Verify(context.Background(), f.events(), Options{})
	require.ErrorIs(t, err, ErrOutOfOrder)
}

func TestVerify_CancelledContextStops(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8, 2, 50)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Verify(ctx, f.events(), Options{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestVerify_VerdictDoesNotDependOnBatchingOrWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 13, 4, 60)
	f.chains[f.tenant(0)][33].Signature[7] ^= 2                                                  // bad-signature at 34
	f.chains[f.tenant(1)][12].Payload[3] ^= 1                                                    // hash-mismatch at 13
	f.chains[f.tenant(1)][5].Signature[0] ^= 1                                                   // ... but bad-signature at 6 comes first
	f.chains[f.tenant(3)] = append(f.chains[f.tenant(3)][:40:40], f.chains[f.tenant(3)][41:]...) // seq-gap at 41
	for _, w := range []struct {
		workers, batch int
		strict         bool
	}{{1, 1, false}, {2, 7, false}, {3, 64, false}, {2, 256, false}, {2, 5, true}} {
		r := run(t, f, Options{Workers: w.workers, BatchSize: w.batch, Strict: w.strict})
		got := map[uuid.UUID]Finding{}
		for _, fd := range r.sum.Findings {
			got[fd.Tenant] = Finding{Seq: fd.Seq, Reason: fd.Reason}
		}
		require.Equal(t, map[uuid.UUID]Finding{
			f.tenant(0): {Seq: 34, Reason: ReasonBadSignature},
			f.tenant(1): {Seq: 6, Reason: ReasonBadSignature},
			f.tenant(3): {Seq: 41, Reason: ReasonSeqGap},
		}, got, "workers %d batch %d strict %v", w.workers, w.batch, w.strict)
	}
}

package chainverify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
)

// fixture is an in-memory deployment: a provider chain (root key.issued,
// one tenant.created per tenant) and one signed chain per tenant, built the
// way the append path builds them. Tests tamper with it and verify.
type fixture struct {
	t      testing.TB
	priv   ed25519.PrivateKey
	keyID  string
	chains map[uuid.UUID][]*Event
	order  []uuid.UUID // provider first, then ascending tenant id
	now    time.Time
}

func newFixture(t testing.TB, seed uint64, tenants, eventsPerTenant int) *fixture {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var keySeed [32]byte
	for i := range keySeed {
		keySeed[i] = byte(rng.Uint32())
	}
	priv := ed25519.NewKeyFromSeed(keySeed[:])
	f := &fixture{
		t:      t,
		priv:   priv,
		keyID:  KeyID(priv.Public().(ed25519.PublicKey)),
		chains: map[uuid.UUID][]*Event{},
		now:    time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
	}
	pub := priv.Public().(ed25519.PublicKey)
	f.appendEvent(ProviderTenant, TypeKeyIssued, mustJSON(map[string]any{
		"key_id": f.keyID, "public_key": base64.StdEncoding.EncodeToString(pub),
	}))
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[0] |= 0x01 // never the provider's nil UUID
		ids[i] = uuid.UUID(b)
	}
	for _, id := range ids {
		created := f.appendEvent(ProviderTenant, TypeTenantCreated, mustJSON(map[string]any{
			"tenant_id": id.String(), "name": "t-" + id.String()[:8],
		}))
		f.appendEvent(id, TypeTenantGenesis, mustJSON(map[string]any{
			"provider_seq": created.Seq, "provider_hash": hex.EncodeToString(created.Hash),
		}))
		for range eventsPerTenant - 1 {
			f.appendEvent(id, "claim.submitted", f.claimPayload(rng))
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	f.order = append([]uuid.UUID{ProviderTenant}, ids...)
	return f
}

func (f *fixture) claimPayload(rng *rand.Rand) []byte {
	var d [32]byte
	for i := range d {
		d[i] = byte(rng.Uint32())
	}
	// ~300 bytes, like a real digest-only claim payload.
	return mustJSON(map[string]any{
		"artifact_id": uuid.UUID(d[:16]).String(), "version": 1, "workarea_id": "wa-1",
		"writer": "agent:ingest", "principal": "user:alice", "provenance": "observed",
		"plaintext_digest":  hex.EncodeToString(d[:]),
		"ciphertext_digest": hex.EncodeToString(d[:]),
	})
}

// appendEvent signs and appends the next event of tenant's chain.
func (f *fixture) appendEvent(tenant uuid.UUID, typ string, payload []byte) *Event {
	c := f.chains[tenant]
	prev := make([]byte, 32)
	seq := int64(1)
	if n := len(c); n > 0 {
		prev = c[n-1].Hash
		seq = c[n-1].Seq + 1
	}
	f.now = f.now.Add(time.Millisecond)
	ev := &Event{Tenant: tenant, Seq: seq, PrevHash: prev, KeyID: f.keyID,
		EventType: typ, Payload: payload, RecordedAt: f.now}
	f.seal(ev, f.priv)
	f.chains[tenant] = append(c, ev)
	return ev
}

// seal recomputes ev's hash and signs it with priv, as an attacker holding
// priv would after editing it.
func (f *fixture) seal(ev *Event, priv ed25519.PrivateKey) {
	d := payloadDigest(ev.Payload)
	env, err := appendEnvelope(nil, ev, &d)
	require.NoError(f.t, err)
	h := chain.EnvelopeHash(env)
	ev.Hash = h[:]
	ev.Signature = ed25519.Sign(priv, env)
}

func (f *fixture) tenant(i int) uuid.UUID { return f.order[i+1] }

func (f *fixture) events() iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		for _, t := range f.order {
			for _, ev := range f.chains[t] {
				// Hand out a copy in a reused buffer, like a database
				// source reusing its row buffers, so a verifier that
				// keeps references shows up as a wrong result.
				cp := *ev
				if !yield(&cp, nil) {
					return
				}
			}
		}
	}
}

func (f *fixture) count() int {
	n := 0
	for _, c := range f.chains {
		n += len(c)
	}
	return n
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint("marshal: ", err))
	}
	return b
}

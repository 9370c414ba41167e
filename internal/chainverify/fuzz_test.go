package chainverify

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzVerifyRow replaces one stored row of a clean chain with arbitrary
// column values. Whatever the bytes, the verifier must not panic, and a row
// that differs from the signed one in any column must be reported: a
// finding on that chain at or before the row, or (for a seq that goes
// backwards) an out-of-order error from the source contract.
func FuzzVerifyRow(f *testing.F) {
	base := newFixture(f, 21, 1, 6)
	tenant := base.tenant(0)
	orig := base.chains[tenant][3]
	f.Add(orig.Seq, orig.PrevHash, orig.Hash, orig.Signature, orig.KeyID, orig.EventType, orig.Payload, orig.RecordedAt.UnixMicro())
	f.Add(int64(4), []byte{}, []byte{1}, []byte{}, "", "", []byte(nil), int64(0))
	f.Add(int64(9), orig.PrevHash, orig.Hash, orig.Signature[:10], "\xff", string(make([]byte, 70000)), []byte("{"), int64(-1))
	f.Add(int64(-3), orig.PrevHash, orig.Hash, orig.Signature, orig.KeyID, orig.EventType, orig.Payload, int64(1<<62))
	f.Fuzz(func(t *testing.T, seq int64, prev, hash, sig []byte, keyID, typ string, payload []byte, micros int64) {
		fx := newFixture(t, 21, 1, 6)
		ev := fx.chains[tenant][3]
		row := &Event{Tenant: tenant, Seq: seq, PrevHash: prev, Hash: hash, Signature: sig,
			KeyID: keyID, EventType: typ, Payload: payload, RecordedAt: time.UnixMicro(micros).UTC()}
		same := seq == ev.Seq && bytes.Equal(prev, ev.PrevHash) && bytes.Equal(hash, ev.Hash) &&
			bytes.Equal(sig, ev.Signature) && keyID == ev.KeyID && typ == ev.EventType &&
			bytes.Equal(payload, ev.Payload) && micros == ev.RecordedAt.UnixMicro()
		fx.chains[tenant][3] = row
		sum, err := Verify(context.Background(), fx.events(), Options{BatchSize: 4})
		if err != nil {
			require.ErrorIs(t, err, ErrOutOfOrder)
			require.Less(t, seq, ev.Seq)
			return
		}
		if same {
			require.Empty(t, sum.Findings)
			return
		}
		require.Len(t, sum.Findings, 1, "a changed row must be found")
		require.Equal(t, tenant, sum.Findings[0].Tenant)
		require.LessOrEqual(t, sum.Findings[0].Seq, ev.Seq)
	})
}

// FuzzProviderPayload re-signs provider and genesis events with arbitrary
// payloads using the real key, so the signature passes and only the
// payload decoding (key.issued, tenant.created, tenant.genesis) is
// exercised. It must never panic, and a clean run must mean the payloads
// still say what the checks need.
func FuzzProviderPayload(f *testing.F) {
	f.Add(0, []byte(`{"key_id":"x","public_key":"AAAA"}`))
	f.Add(1, []byte(`{"tenant_id":"not-a-uuid"}`))
	f.Add(2, []byte(`{"provider_seq":2,"provider_hash":"zz"}`))
	f.Add(2, []byte(`{"provider_seq":null}`))
	f.Add(1, []byte(`[]`))
	f.Add(0, []byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, which int, payload []byte) {
		fx := newFixture(t, 22, 1, 3)
		tenant := fx.tenant(0)
		var ev *Event
		switch ((which % 3) + 3) % 3 {
		case 0:
			ev = fx.chains[ProviderTenant][0] // root key.issued
		case 1:
			ev = fx.chains[ProviderTenant][1] // tenant.created
		default:
			ev = fx.chains[tenant][0] // tenant.genesis
		}
		ev.Payload = payload
		fx.seal(ev, fx.priv)
		// Relink everything after it so only the payload's meaning is at stake.
		for _, id := range fx.order {
			c := fx.chains[id]
			for i := 1; i < len(c); i++ {
				c[i].PrevHash = c[i-1].Hash
				fx.seal(c[i], fx.priv)
			}
		}
		sum, err := Verify(context.Background(), fx.events(), Options{BatchSize: 2})
		require.NoError(t, err)
		for _, fd := range sum.Findings {
			require.Contains(t, Reasons, fd.Reason)
		}
	})
}

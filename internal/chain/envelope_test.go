package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// vector is the published test vector (docs/journal-envelope.md).
type vector struct {
	SeedHex       string `json:"seed_hex"`
	PublicKeyHex  string `json:"public_key_hex"`
	KeyID         string `json:"key_id"`
	TenantID      string `json:"tenant_id"`
	Seq           uint64 `json:"seq"`
	PrevHashHex   string `json:"prev_hash_hex"`
	EventType     string `json:"event_type"`
	RecordedAt    string `json:"recorded_at"`
	RecordedAtUS  int64  `json:"recorded_at_us"`
	Payload       string `json:"payload"`
	PayloadDigest string `json:"payload_digest_hex"`
	EnvelopeHex   string `json:"envelope_hex"`
	HashHex       string `json:"hash_hex"`
	SignatureHex  string `json:"signature_hex"`
}

func buildVector(t *testing.T) vector {
	seed := sha256.Sum256([]byte("oml envelope v1 test vector seed"))
	k, err := keys.FromSeed(seed[:])
	require.NoError(t, err)
	prev := sha256.Sum256([]byte("oml envelope v1 test vector previous event"))
	payload := `{"artifact_id":"art-1","version":1,"workarea_id":"wa-1","writer":"alice","principal":"team-a","provenance":"human","plaintext_digest":"` +
		hex.EncodeToString(sha256.New().Sum(nil)) + `","ciphertext_digest":"` + hex.EncodeToString(prev[:]) + `"}`
	at := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	env := Envelope{
		TenantID:      uuid.MustParse("3f2504e0-4f89-11d3-9a0c-0305e82c3301"),
		Seq:           2,
		PrevHash:      prev,
		EventType:     "claim.submitted",
		RecordedAt:    at,
		KeyID:         k.KeyID(),
		PayloadDigest: PayloadDigest([]byte(payload)),
	}
	rec, err := seal(k, env, []byte(payload))
	require.NoError(t, err)
	enc, err := env.Encode()
	require.NoError(t, err)
	return vector{
		SeedHex:       hex.EncodeToString(seed[:]),
		PublicKeyHex:  hex.EncodeToString(k.Public()),
		KeyID:         k.KeyID(),
		TenantID:      env.TenantID.String(),
		Seq:           env.Seq,
		PrevHashHex:   hex.EncodeToString(prev[:]),
		EventType:     env.EventType,
		RecordedAt:    at.Format(time.RFC3339Nano),
		RecordedAtUS:  at.UnixMicro(),
		Payload:       payload,
		PayloadDigest: env.PayloadDigest.String(),
		EnvelopeHex:   hex.EncodeToString(enc),
		HashHex:       rec.Hash.String(),
		SignatureHex:  hex.EncodeToString(rec.Signature),
	}
}

func TestEnvelopeGoldenVector(t *testing.T) {
	t.Parallel()
	got := buildVector(t)
	path := filepath.Join("testdata", "envelope_v1.json")
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var want vector
	require.NoError(t, json.Unmarshal(b, &want))
	require.Equal(t, want, got, "the v1 envelope encoding changed; that breaks every existing chain")

	// Independently of our encoder: the envelope bytes decode to the fields,
	// the hash is SHA-256 of them, the signature verifies.
	enc, _ := hex.DecodeString(want.EnvelopeHex)
	env, err := DecodeEnvelope(enc)
	require.NoError(t, err)
	require.Equal(t, want.TenantID, env.TenantID.String())
	require.Equal(t, want.Seq, env.Seq)
	require.Equal(t, want.RecordedAtUS, env.RecordedAt.UnixMicro())
	sum := sha256.Sum256(enc)
	require.Equal(t, want.HashHex, hex.EncodeToString(sum[:]))
	pub, _ := hex.DecodeString(want.PublicKeyHex)
	sig, _ := hex.DecodeString(want.SignatureHex)
	require.True(t, VerifySignature(pub, enc, sig))
	require.Len(t, enc, envelopeFixed+len(want.EventType)+len(want.KeyID))
}

func TestRecordCheckDetectsTampering(t *testing.T) {
	t.Parallel()
	k, _ := keys.Generate()
	env := Envelope{TenantID: uuid.New(), Seq: 1, EventType: "tenant.genesis", RecordedAt: time.UnixMicro(1700000000000001), KeyID: k.KeyID()}
	payload := []byte(`{"x":1}`)
	env.PayloadDigest = PayloadDigest(payload)
	rec, err := seal(k, env, payload)
	require.NoError(t, err)
	require.NoError(t, rec.Check(k.Public()))

	bad := rec
	bad.Payload = []byte(`{"x":2}`)
	require.ErrorContains(t, bad.Check(k.Public()), "does not match")
	bad = rec
	bad.RecordedAt = bad.RecordedAt.Add(time.Microsecond)
	require.ErrorContains(t, bad.Check(k.Public()), "does not match")
	other, _ := keys.Generate()
	require.ErrorContains(t, rec.Check(other.Public()), "signature does not verify")
}

func TestDecodeEnvelopeRejectsMalformed(t *testing.T) {
	t.Parallel()
	good, err := Envelope{EventType: "a", KeyID: "b", RecordedAt: time.UnixMicro(0)}.Encode()
	require.NoError(t, err)
	mut := func(f func([]byte) []byte) []byte { return f(append([]byte{}, good...)) }
	for name, b := range map[string][]byte{
		"short":          good[:10],
		"bad magic":      mut(func(b []byte) []byte { b[0] = 'X'; return b }),
		"bad version":    mut(func(b []byte) []byte { b[4] = 2; return b }),
		"trailing bytes": append(append([]byte{}, good...), 0),
		"truncated":      good[:len(good)-1],
		"long string":    mut(func(b []byte) []byte { b[61] = 0xff; return b }),
	} {
		_, err := DecodeEnvelope(b)
		require.ErrorIs(t, err, ErrMalformedEnvelope, name)
	}
	_, err = Envelope{EventType: "\xff"}.Encode()
	require.ErrorContains(t, err, "UTF-8")
}

func FuzzEnvelopeRoundTrip(f *testing.F) {
	good, _ := Envelope{TenantID: uuid.New(), Seq: 7, EventType: "claim.promoted", KeyID: "0123456789abcdef0123456789abcdef", RecordedAt: time.UnixMicro(1)}.Encode()
	f.Add(good)
	f.Add([]byte("OMLJ\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := DecodeEnvelope(b)
		if err != nil {
			return
		}
		again, err := env.Encode()
		require.NoError(t, err)
		require.Equal(t, b, again, "decode then encode must reproduce the bytes")
		env2, err := DecodeEnvelope(again)
		require.NoError(t, err)
		require.Equal(t, env, env2)
	})
}

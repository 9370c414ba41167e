package chainverify

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
	"github.com/stretchr/testify/require"
)

// order2Point is the encoding of (0, -1), the point of order 2.
var order2Point = mustHex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// signWithTorsionR makes the edge-case signature the two ed25519 rules
// disagree on: R = rB + T with T of order 2 and S = r + k·a, where
// k = H(R‖A‖M). Cofactored verification ([8]SB = [8]R + [8]kA) accepts it,
// crypto/ed25519's cofactorless check (SB - kA encodes to R) rejects it,
// and only the holder of the private key a can make one: k depends on R,
// so adding T to someone else's R invalidates their S.
func signWithTorsionR(t *testing.T, priv ed25519.PrivateKey, msg []byte) []byte {
	t.Helper()
	h := sha512.Sum512(priv.Seed())
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	a, err := scalar.NewFromBytesModOrder(h[:32])
	require.NoError(t, err)

	var rnd [64]byte
	copy(rnd[:], "oml torsion test nonce: deterministic is fine here.")
	r, err := scalar.NewFromBytesModOrderWide(rnd[:])
	require.NoError(t, err)
	var R0, T, R curve.EdwardsPoint
	R0.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
	var tc curve.CompressedEdwardsY
	_, err = tc.SetBytes(order2Point)
	require.NoError(t, err)
	_, err = T.SetCompressedY(&tc)
	require.NoError(t, err)
	require.True(t, T.IsSmallOrder())
	R.Add(&R0, &T)
	var rc curve.CompressedEdwardsY
	rc.SetEdwardsPoint(&R)

	hh := sha512.New()
	hh.Write(rc[:])
	hh.Write(priv.Public().(ed25519.PublicKey))
	hh.Write(msg)
	k, err := scalar.NewFromBytesModOrderWide(hh.Sum(nil))
	require.NoError(t, err)
	var S scalar.Scalar
	S.Mul(k, a)
	S.Add(&S, r)
	sig := make([]byte, 64)
	copy(sig, rc[:])
	require.NoError(t, S.ToBytes(sig[32:]))
	return sig
}

func TestSignatureRule_TorsionComponentInR(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pub := priv.Public().(ed25519.PublicKey)
	msg := []byte("an envelope")
	sig := signWithTorsionR(t, priv, msg)

	k, err := newKey(KeyID(pub), pub, 1)
	require.NoError(t, err)
	// The two rules disagree on exactly this signature.
	require.False(t, ed25519.Verify(pub, msg, sig), "crypto/ed25519 (cofactorless) must reject it")
	require.True(t, verifyOne(k, msg, sig), "the cofactored rule must accept it")
	require.False(t, verifyStrict(k, msg, sig))
	// The batch decides like the single cofactored rule, also when the
	// batch holds other (honest) signatures.
	bv := voi.NewBatchVerifier()
	bv.AddExpanded(k.expanded, msg, sig)
	honest := ed25519.Sign(priv, []byte("honest"))
	bv.AddExpanded(k.expanded, []byte("honest"), honest)
	ok, _ := bv.Verify(nil)
	require.True(t, ok)
}

func TestVerify_TorsionSignatureAcceptedByDefaultRefusedByStrict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 11, 2, 40)
	tenant := f.tenant(1)
	ev := f.chains[tenant][17]
	f.seal(ev, f.priv)
	d := payloadDigest(ev.Payload)
	env, err := appendEnvelope(nil, ev, &d)
	require.NoError(t, err)
	ev.Signature = signWithTorsionR(t, f.priv, env)

	r := run(t, f, Options{BatchSize: 16})
	require.Empty(t, r.sum.Findings, "the default rule accepts a key holder's torsioned signature")
	r = run(t, f, Options{Strict: true})
	requireOnly(t, f, r, tenant, 18, ReasonBadSignature)
}

func TestSignatureRule_HonestSignaturesPassBothRules(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pub := priv.Public().(ed25519.PublicKey)
	k, err := newKey(KeyID(pub), pub, 1)
	require.NoError(t, err)
	for i := range 200 {
		msg := []byte{byte(i), byte(i >> 8), 'x'}
		sig := ed25519.Sign(priv, msg)
		require.True(t, verifyOne(k, msg, sig))
		require.True(t, verifyStrict(k, msg, sig))
		// A non-canonical S (S + L) is refused by both.
		bad := append([]byte(nil), sig...)
		addL(bad[32:])
		require.False(t, verifyOne(k, msg, bad))
		require.False(t, verifyStrict(k, msg, bad))
	}
}

// addL adds the group order L to the little-endian scalar s in place (the
// result is the same scalar mod L, non-canonically encoded, when it fits).
func addL(s []byte) {
	l := mustHex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	var carry uint16
	for i := range 32 {
		v := uint16(s[i]) + uint16(l[i]) + carry
		s[i] = byte(v)
		carry = v >> 8
	}
}

func TestKeyRule_WeakPublicKeysAreRefused(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	honest := priv.Public().(ed25519.PublicKey)

	// A mixed-order key: honest A plus the order-2 point.
	var a, T, m curve.EdwardsPoint
	var c curve.CompressedEdwardsY
	_, _ = c.SetBytes(honest)
	_, _ = a.SetCompressedY(&c)
	_, _ = c.SetBytes(order2Point)
	_, _ = T.SetCompressedY(&c)
	m.Add(&a, &T)
	var mc curve.CompressedEdwardsY
	mc.SetEdwardsPoint(&m)

	// A non-canonical encoding of the order-1 identity's neighbour: y = p
	// (≡ 0 mod p) encodes a small-order point non-canonically.
	nonCanonical := mustHex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")

	for name, pub := range map[string][]byte{
		"identity":      mustHex("0100000000000000000000000000000000000000000000000000000000000000"),
		"order 2":       order2Point,
		"mixed order":   mc[:],
		"non-canonical": nonCanonical,
		"short":         honest[:31],
		"not on curve":  mustHex("0200000000000000000000000000000000000000000000000000000000000000"),
	} {
		_, err := newKey("x", pub, 1)
		require.Error(t, err, name)
	}
	_, err = newKey("x", honest, 1)
	require.NoError(t, err)
}

func TestVerify_WeakIssuedKeyIsAFinding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12, 1, 3)
	pub := order2Point
	f.appendEvent(ProviderTenant, TypeKeyIssued, mustJSON(map[string]any{
		"key_id": KeyID(pub), "public_key": base64.StdEncoding.EncodeToString(pub),
	}))
	r := run(t, f, Options{})
	require.Len(t, r.sum.Findings, 1)
	require.Equal(t, ReasonUnknownKey, r.sum.Findings[0].Reason)
	require.Equal(t, ProviderTenant, r.sum.Findings[0].Tenant)
}

package witness

import (
	"crypto/ed25519"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerifiedKey_LengthPrefixSeparatesTriplesThatConcatenateAlike: the
// cache key is a hash of a length-prefixed encoding, so moving bytes
// between the message and the signature (same concatenation), or between
// the public key and the message, makes another key; the same triple
// always makes the same one.
func TestVerifiedKey_LengthPrefixSeparatesTriplesThatConcatenateAlike(t *testing.T) {
	t.Parallel()
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	pub[0] = 1
	msg := []byte("oml witness v1 tenant seq hash")
	sig := make([]byte, ed25519.SignatureSize)
	sig[5] = 9

	k := verifiedKey(pub, msg, sig)
	require.Equal(t, k, verifiedKey(append(ed25519.PublicKey(nil), pub...), append([]byte(nil), msg...), append([]byte(nil), sig...)))

	seen := map[[32]byte]string{k: "original"}
	add := func(name string, p ed25519.PublicKey, m, s []byte) {
		t.Helper()
		got := verifiedKey(p, m, s)
		require.NotContains(t, seen, got, "%s collides with %s", name, seen[got])
		seen[got] = name
	}
	add("last message byte moved into the signature", pub, msg[:len(msg)-1], append([]byte{msg[len(msg)-1]}, sig...))
	add("first signature byte moved into the message", pub, append(append([]byte(nil), msg...), sig[0]), sig[1:])
	add("last key byte moved into the message", pub[:len(pub)-1], append([]byte{pub[len(pub)-1]}, msg...), sig)
	add("empty message", pub, nil, sig)
	add("empty signature", pub, msg, nil)
	for i := range sig {
		s := append([]byte(nil), sig...)
		s[i] ^= 1
		add("signature byte flipped", pub, msg, s)
	}
	for i := range msg {
		m := append([]byte(nil), msg...)
		m[i] ^= 1
		add("message byte flipped", pub, m, sig)
	}
}

// TestVerifySig_RemembersOnlySuccessesUnderTheirKey: a good signature is
// stored under its triple's key, a bad one is not stored at all.
func TestVerifySig_RemembersOnlySuccessesUnderTheirKey(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	msg := []byte("remember me")
	sig := ed25519.Sign(priv, msg)
	bad := append([]byte(nil), sig...)
	bad[0] ^= 1

	require.True(t, verifySig(pub, msg, sig))
	require.False(t, verifySig(pub, msg, bad))
	verified.mu.Lock()
	_, good := verified.m[verifiedKey(pub, msg, sig)]
	_, wrong := verified.m[verifiedKey(pub, msg, bad)]
	verified.mu.Unlock()
	require.True(t, good)
	require.False(t, wrong)
	require.True(t, verifySig(pub, msg, sig), "served from the cache")
}

package chainverify

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/omlhq/oml/internal/keys"
)

// Key is a signing key issued by the provider chain.
type Key struct {
	ID     string
	Public ed25519.PublicKey
	// IssuedSeq is the provider-chain seq of the key.issued event.
	IssuedSeq int64

	expanded *voi.ExpandedPublicKey
}

// KeyID is the key id of an ed25519 public key (internal/keys owns the rule).
func KeyID(pub ed25519.PublicKey) string { return keys.KeyID(pub) }

// errWeakKey means a public key is not a canonical encoding of a point of
// prime order; such a key is never honest and oml refuses it.
var errWeakKey = errors.New("the public key is not a canonical encoding of a point of prime order")

// newKey checks pub and prepares it for batch verification. oml accepts a
// public key only if it is 32 bytes, canonically encoded, and a point of the
// prime-order subgroup (not small order, no torsion component). Every
// honestly generated key (A = aB) passes; refusing the rest is what makes
// the batch and the single-signature rule coincide (docs/chain-verify.md).
// The check costs ~40 µs once per key.
func newKey(id string, pub []byte, issuedSeq int64) (*Key, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the public key is %d bytes, not %d", len(pub), ed25519.PublicKeySize)
	}
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(pub); err != nil {
		return nil, errWeakKey
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&c); err != nil {
		return nil, errWeakKey
	}
	if !c.IsCanonicalVartime() || p.IsSmallOrder() || !p.IsTorsionFree() {
		return nil, errWeakKey
	}
	exp, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return nil, errWeakKey
	}
	return &Key{
		ID:        id,
		Public:    ed25519.PublicKey(append([]byte(nil), pub...)),
		IssuedSeq: issuedSeq,
		expanded:  exp,
	}, nil
}

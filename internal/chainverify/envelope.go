package chainverify

import (
	"errors"
	"fmt"

	"github.com/omlhq/oml/internal/chain"
)

// appendEnvelope rebuilds the signed envelope of a stored row with the
// project's one encoder (internal/chain) and appends it to dst. It fails
// only when the stored fields cannot be encoded at all (a string longer
// than 65535 bytes or not UTF-8, a prev_hash that is not 32 bytes, a seq
// that is not positive): such a row cannot hash to anything it was signed as.
func appendEnvelope(dst []byte, ev *Event, payloadDigest *chain.Hash) ([]byte, error) {
	if ev.Seq < 1 {
		return dst, fmt.Errorf("seq %d is not positive", ev.Seq)
	}
	if len(ev.PrevHash) != chain.HashSize {
		return dst, errors.New("prev_hash is not 32 bytes")
	}
	env := chain.Envelope{
		TenantID:      ev.Tenant,
		Seq:           uint64(ev.Seq),
		PrevHash:      chain.Hash(ev.PrevHash),
		EventType:     ev.EventType,
		RecordedAt:    ev.RecordedAt,
		KeyID:         ev.KeyID,
		PayloadDigest: *payloadDigest,
	}
	b, err := env.Encode()
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// payloadDigest is SHA-256 of the exact stored payload bytes.
func payloadDigest(payload []byte) chain.Hash { return chain.PayloadDigest(payload) }

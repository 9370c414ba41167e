package chainverify

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// TEMPORARY: this encoder follows helpers/ENVELOPE.md v1 only until
// internal/chain (the project's one encoder) lands; then appendEnvelope
// becomes a thin call into it.

var envelopeMagic = [4]byte{'O', 'M', 'L', 'J'}

const envelopeVersion = 1

// appendEnvelope appends the canonical signed envelope of ev to dst. It
// fails only when a stored field cannot be encoded at all (a string longer
// than 65535 bytes, a prev_hash that is not 32 bytes, a negative seq).
func appendEnvelope(dst []byte, ev *Event, payloadDigest *[32]byte) ([]byte, error) {
	if ev.Seq < 1 {
		return dst, fmt.Errorf("seq %d is not positive", ev.Seq)
	}
	if len(ev.PrevHash) != 32 {
		return dst, fmt.Errorf("prev_hash is %d bytes, not 32", len(ev.PrevHash))
	}
	if len(ev.EventType) > 0xffff || len(ev.KeyID) > 0xffff {
		return dst, errors.New("event_type or key_id is longer than 65535 bytes")
	}
	dst = append(dst, envelopeMagic[:]...)
	dst = append(dst, envelopeVersion)
	dst = append(dst, ev.Tenant[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ev.Seq))
	dst = append(dst, ev.PrevHash...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ev.EventType)))
	dst = append(dst, ev.EventType...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ev.RecordedAt.UnixMicro()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ev.KeyID)))
	dst = append(dst, ev.KeyID...)
	dst = append(dst, payloadDigest[:]...)
	return dst, nil
}

// payloadDigest is SHA-256 of the exact stored payload bytes.
func payloadDigest(payload []byte) [32]byte { return sha256.Sum256(payload) }

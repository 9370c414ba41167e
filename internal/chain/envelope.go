package chain

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Envelope v1 constants (docs/journal-envelope.md).
const (
	EnvelopeMagic   = "OMLJ"
	EnvelopeVersion = 1
	HashSize        = sha256.Size           // 32
	SignatureSize   = ed25519.SignatureSize // 64
	// envelopeFixed is every byte of a v1 envelope except the two strings:
	// magic 4 + version 1 + tenant 16 + seq 8 + prev 32 + two str16
	// lengths 4 + recorded_at 8 + payload digest 32.
	envelopeFixed = 4 + 1 + 16 + 8 + 32 + 2 + 8 + 2 + 32
)

// ProviderTenant is the reserved tenant whose chain holds key.issued and
// tenant.created.
var ProviderTenant = uuid.UUID{}

// Hash is a SHA-256 digest.
type Hash [HashSize]byte

// String is lowercase hex.
func (h Hash) String() string { return fmt.Sprintf("%x", h[:]) }

// Envelope is the digest-only structure every journal event is signed
// over. Its byte encoding (Encode) is the signed message and its SHA-256 is
// the event's hash. It never holds the payload itself, only its digest.
type Envelope struct {
	TenantID      uuid.UUID
	Seq           uint64    // per tenant, first event is 1
	PrevHash      Hash      // all zero for seq 1
	EventType     string    // e.g. "claim.submitted"
	RecordedAt    time.Time // encoded as microseconds since the Unix epoch
	KeyID         string    // the signing key's id
	PayloadDigest Hash      // SHA-256 of the exact stored payload bytes
}

// Encode returns the canonical v1 bytes:
//
//	"OMLJ" | u8 1 | tenant[16] | u64 seq | prev_hash[32] |
//	u16 len | event_type | i64 recorded_at µs | u16 len | key_id | payload_digest[32]
//
// all integers big-endian. It fails on strings longer than 65535 bytes or
// not valid UTF-8; sub-microsecond parts of RecordedAt are dropped (the
// append path only produces microsecond times).
func (e Envelope) Encode() ([]byte, error) {
	if err := checkStr16("event_type", e.EventType); err != nil {
		return nil, err
	}
	if err := checkStr16("key_id", e.KeyID); err != nil {
		return nil, err
	}
	b := make([]byte, 0, envelopeFixed+len(e.EventType)+len(e.KeyID))
	b = append(b, EnvelopeMagic...)
	b = append(b, EnvelopeVersion)
	b = append(b, e.TenantID[:]...)
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = append(b, e.PrevHash[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.EventType)))
	b = append(b, e.EventType...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.RecordedAt.UnixMicro()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.KeyID)))
	b = append(b, e.KeyID...)
	b = append(b, e.PayloadDigest[:]...)
	return b, nil
}

func checkStr16(field, s string) error {
	if len(s) > math.MaxUint16 {
		return fmt.Errorf("envelope %s is %d bytes, longer than the 65535 a str16 can hold", field, len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("envelope %s is not valid UTF-8", field)
	}
	return nil
}

// ErrMalformedEnvelope wraps every DecodeEnvelope failure.
var ErrMalformedEnvelope = errors.New("malformed envelope")

// DecodeEnvelope parses canonical v1 bytes. It is strict: the magic, the
// version, UTF-8 strings and the exact total length are checked, so
// Encode(DecodeEnvelope(b)) == b for every b it accepts.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	fail := func(format string, args ...any) (Envelope, error) {
		return Envelope{}, fmt.Errorf("%w: %s", ErrMalformedEnvelope, fmt.Sprintf(format, args...))
	}
	if len(b) < envelopeFixed {
		return fail("%d bytes, shorter than the %d-byte minimum", len(b), envelopeFixed)
	}
	if !bytes.Equal(b[:4], []byte(EnvelopeMagic)) {
		return fail("magic is %q, expected %q", b[:4], EnvelopeMagic)
	}
	if b[4] != EnvelopeVersion {
		return fail("version %d, only version %d is defined", b[4], EnvelopeVersion)
	}
	p := b[5:]
	copy(e.TenantID[:], p[:16])
	p = p[16:]
	e.Seq = binary.BigEndian.Uint64(p)
	p = p[8:]
	copy(e.PrevHash[:], p[:32])
	p = p[32:]
	str := func(field string) (string, bool) {
		if len(p) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			return "", false
		}
		s := string(p[2 : 2+n])
		p = p[2+n:]
		return s, true
	}
	var ok bool
	if e.EventType, ok = str("event_type"); !ok {
		return fail("event_type length runs past the end")
	}
	if len(p) < 8 {
		return fail("truncated before recorded_at")
	}
	e.RecordedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(p))).UTC()
	p = p[8:]
	if e.KeyID, ok = str("key_id"); !ok {
		return fail("key_id length runs past the end")
	}
	if len(p) != 32 {
		return fail("%d bytes after key_id, expected exactly the 32-byte payload digest", len(p))
	}
	copy(e.PayloadDigest[:], p)
	if !utf8.ValidString(e.EventType) || !utf8.ValidString(e.KeyID) {
		return fail("event_type or key_id is not valid UTF-8")
	}
	return e, nil
}

// PayloadDigest is SHA-256 of the exact stored payload bytes.
func PayloadDigest(payload []byte) Hash { return sha256.Sum256(payload) }

// EnvelopeHash is the event hash: SHA-256 of the encoded envelope.
func EnvelopeHash(encoded []byte) Hash { return sha256.Sum256(encoded) }

// VerifySignature reports whether sig is pub's Ed25519 signature of the
// encoded envelope.
func VerifySignature(pub ed25519.PublicKey, encoded, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && len(sig) == SignatureSize && ed25519.Verify(pub, encoded, sig)
}

// Signer signs envelopes with the deployment key (keys.Key implements it).
type Signer interface {
	KeyID() string
	Sign(msg []byte) []byte
}

// Record is one journal row as stored in oml.journal.
type Record struct {
	TenantID   uuid.UUID
	Seq        uint64
	PrevHash   Hash
	Hash       Hash
	Signature  []byte
	KeyID      string
	EventType  string
	Payload    []byte // the exact signed payload bytes
	RecordedAt time.Time
}

// Envelope rebuilds the record's envelope from its columns (digesting the
// payload).
func (r Record) Envelope() Envelope {
	return Envelope{
		TenantID:      r.TenantID,
		Seq:           r.Seq,
		PrevHash:      r.PrevHash,
		EventType:     r.EventType,
		RecordedAt:    r.RecordedAt,
		KeyID:         r.KeyID,
		PayloadDigest: PayloadDigest(r.Payload),
	}
}

// Check recomputes the record's hash from its columns and verifies its
// signature with pub. It does not check the link to the previous record.
func (r Record) Check(pub ed25519.PublicKey) error {
	enc, err := r.Envelope().Encode()
	if err != nil {
		return err
	}
	if EnvelopeHash(enc) != r.Hash {
		return fmt.Errorf("tenant %s seq %d: stored hash %s does not match the recomputed %s", r.TenantID, r.Seq, r.Hash, EnvelopeHash(enc))
	}
	if !VerifySignature(pub, enc, r.Signature) {
		return fmt.Errorf("tenant %s seq %d: the signature does not verify with key %s", r.TenantID, r.Seq, r.KeyID)
	}
	return nil
}

// seal builds a record: encodes the envelope, hashes and signs it.
func seal(s Signer, env Envelope, payload []byte) (Record, error) {
	enc, err := env.Encode()
	if err != nil {
		return Record{}, err
	}
	return Record{
		TenantID:   env.TenantID,
		Seq:        env.Seq,
		PrevHash:   env.PrevHash,
		Hash:       EnvelopeHash(enc),
		Signature:  s.Sign(enc),
		KeyID:      env.KeyID,
		EventType:  env.EventType,
		Payload:    payload,
		RecordedAt: env.RecordedAt,
	}, nil
}

package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/store"
)

// Signed heads are also published in the C2SP signed-note checkpoint form
// (c2sp.org/tlog-checkpoint, c2sp.org/signed-note), so an external witness
// that speaks that format can check — and cosign — where each chain stood:
//
//	oml/tenant/<tenant uuid>        the origin: one log per tenant chain
//	<seq>                           the "tree size": events in the chain
//	<base64 of the head's hash>     the "root hash": the chain head's hash
//	                                (a blank line ends the body)
//	— oml-<key id> <base64(key hash[4] || ed25519 signature)>
//
// The signature is Ed25519 over the body (the three lines, each ending in
// a newline). The key hash is the first four bytes, big-endian, of
// SHA-256(key name || "\n" || 0x01 || public key); VerifierKey gives the
// verifier key string (name+hash+base64(0x01||public key)) that signed-note
// verifiers take. The chain head is a hash chain's, not a Merkle tree's, so
// a consistency proof between two checkpoints is the chain's events between
// them (oml chain export), not a Merkle proof.
//
// They live beside the JSON heads, under the same put-if-absent rule:
//
//	_oml_witness/<tenant uuid>/<seq, 20 digits>.checkpoint

// CheckpointSuffix names the signed-note form of a head.
const CheckpointSuffix = ".checkpoint"

// ErrCheckpointConflict means another checkpoint is already published for
// the same tenant and seq: two chains claimed that position.
var ErrCheckpointConflict = errors.New("a different checkpoint is already published at this seq")

// NoteSigner is a Signer that also tells its public key (the note's key
// hash covers it). keys.Key implements it.
type NoteSigner interface {
	Signer
	Public() ed25519.PublicKey
}

// CheckpointKey is the object key of tenant's checkpoint at seq.
func CheckpointKey(tenant uuid.UUID, seq int64) string {
	return fmt.Sprintf("%s%s/%020d%s", Prefix, tenant, seq, CheckpointSuffix)
}

// Origin is the checkpoint origin of tenant's chain.
func Origin(tenant uuid.UUID) string { return "oml/tenant/" + tenant.String() }

// NoteKeyName is the signed-note key name of a deployment key.
func NoteKeyName(keyID string) string { return "oml-" + keyID }

func noteKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', 0x01})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

// VerifierKey is the signed-note verifier key of a deployment key, for an
// external witness's configuration.
func VerifierKey(keyID string, pub ed25519.PublicKey) string {
	name := NoteKeyName(keyID)
	return fmt.Sprintf("%s+%08x+%s", name, noteKeyHash(name, pub), base64.StdEncoding.EncodeToString(append([]byte{0x01}, pub...)))
}

// CheckpointBody is the signed text of h's checkpoint.
func (h *Head) CheckpointBody() ([]byte, error) {
	hash := h.HashBytes()
	if hash == nil {
		return nil, fmt.Errorf("the head of tenant %s at seq %d has no valid hash", h.Tenant, h.Seq)
	}
	var b bytes.Buffer
	b.WriteString(Origin(h.Tenant))
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(h.Seq, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(hash))
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// SignCheckpoint returns h's checkpoint as a signed note.
func SignCheckpoint(h *Head, s NoteSigner) ([]byte, error) {
	name := NoteKeyName(s.KeyID())
	return signCheckpoint(h, s, noteKey{name: name, hash: noteKeyHash(name, s.Public())})
}

// signCheckpoint is SignCheckpoint with s's note key name and hash given.
func signCheckpoint(h *Head, s Signer, k noteKey) ([]byte, error) {
	body, err := h.CheckpointBody()
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 4, 4+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, k.hash)
	sig = append(sig, s.Sign(body)...)
	var b bytes.Buffer
	b.Write(body)
	b.WriteByte('\n')
	b.WriteString("\u2014 " + k.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n")
	return b.Bytes(), nil
}

// PublishCheckpoint writes h's signed checkpoint with put-if-absent. The
// same checkpoint again is a no-op (Ed25519 signatures are deterministic,
// so the bytes are equal); another body at the same seq is
// ErrCheckpointConflict.
func PublishCheckpoint(ctx context.Context, st store.Store, h *Head, s NoteSigner) error {
	note, err := SignCheckpoint(h, s)
	if err != nil {
		return err
	}
	return publishCheckpoint(ctx, st, h, note)
}

// publishCheckpoint puts note, h's signed checkpoint (PublishCheckpoint).
func publishCheckpoint(ctx context.Context, st store.Store, h *Head, note []byte) error {
	key := CheckpointKey(h.Tenant, h.Seq)
	err := st.PutIfAbsent(ctx, key, note)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrAmbiguous):
		old, gerr := st.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("publish checkpoint %s: %w (and reading it back failed: %v)", key, err, gerr)
		}
		body, _ := h.CheckpointBody()
		if !bytes.HasPrefix(old, body) || len(old) <= len(body) || old[len(body)] != '\n' {
			return fmt.Errorf("%w: tenant %s seq %d", ErrCheckpointConflict, h.Tenant, h.Seq)
		}
		return nil
	default:
		return fmt.Errorf("publish checkpoint %s to %s: %w", key, st, err)
	}
}

package chainverify

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/witness"
)

// Reason is why a chain failed verification. The set is fixed and
// documented in docs/chain-verify.md; scripts match on these strings.
type Reason string

const (
	// ReasonHashMismatch: the event's stored fields do not hash to its stored
	// hash (a payload byte, the event type, the time or the key id was
	// changed, or the stored hash itself was).
	ReasonHashMismatch Reason = "hash-mismatch"
	// ReasonBrokenLink: the event's prev_hash is not the hash of the event
	// before it (events reordered, swapped, or one rewritten in place).
	ReasonBrokenLink Reason = "broken-link"
	// ReasonSeqGap: the next stored event does not carry the next seq (an
	// event was deleted). Seq is the first missing seq.
	ReasonSeqGap Reason = "seq-gap"
	// ReasonBadSignature: the signature does not verify under the key the
	// event names (see "Signatures oml accepts" in docs/chain-verify.md).
	ReasonBadSignature Reason = "bad-signature"
	// ReasonUnknownKey: the event names a key the provider chain never
	// issued (or issued with an unusable public key, or revoked).
	ReasonUnknownKey Reason = "unknown-key"
	// ReasonBadGenesis: the chain does not start as it must: seq 1 is not
	// the right event type, or a tenant's genesis does not reference the
	// provider tenant.created event that created it (by seq and hash).
	ReasonBadGenesis Reason = "bad-genesis"
	// ReasonHeadMismatch: oml.chain_heads disagrees with the last event.
	ReasonHeadMismatch Reason = "head-mismatch"
	// ReasonTailLost: PostgreSQL's chain is shorter than a head witnessed
	// earlier (outside PostgreSQL, or by a verification checkpoint):
	// committed events were lost, e.g. by a failover.
	ReasonTailLost Reason = "tail-lost"
	// ReasonFork: PostgreSQL holds a different hash at a seq that was
	// witnessed earlier: the chain was rewritten or forked.
	ReasonFork Reason = "fork"
	// ReasonRevokedKey: the event is signed by a key the provider chain
	// revoked (key.revoked) and lies after the revocation's point for its
	// chain (the chain's head recorded in the revocation; the revocation's
	// own seq on the provider chain); or a key.revoked is malformed.
	ReasonRevokedKey Reason = "revoked-key"
	// ReasonBadPayload: the event hashes and may be signed, but its payload
	// is not valid UTF-8: the journal only ever holds UTF-8 JSON payloads,
	// and such a row must never reach a lake string column.
	ReasonBadPayload Reason = "bad-payload"
	// ReasonBadWitness: a witnessed head in the lake cannot be trusted (not
	// a signed head, stored under another key, signed by a key the verified
	// provider chain never issued, or a signature that does not verify).
	// Seq is the seq its object key names. Older valid witnesses are still
	// used as anchors.
	ReasonBadWitness Reason = "bad-witness"
)

// Reasons lists every reason, in documentation order.
var Reasons = []Reason{
	ReasonHashMismatch, ReasonBrokenLink, ReasonSeqGap, ReasonBadSignature,
	ReasonUnknownKey, ReasonBadGenesis, ReasonHeadMismatch, ReasonTailLost, ReasonFork,
	ReasonRevokedKey, ReasonBadPayload, ReasonBadWitness,
}

// Finding is the first bad event of one chain.
type Finding struct {
	Tenant uuid.UUID `json:"tenant"`
	// Seq is the first bad seq of the chain (for seq-gap the first missing
	// seq; for head-mismatch, tail-lost and fork the seq the disagreement
	// is about).
	Seq    int64  `json:"seq"`
	Reason Reason `json:"reason"`
	// Detail is one human sentence.
	Detail string `json:"detail"`
	// Evidence holds the compared values (hex hashes, seqs), under stable
	// snake_case keys such as expected_hash/stored_hash.
	Evidence map[string]string `json:"evidence,omitempty"`
}

func (f Finding) String() string {
	return fmt.Sprintf("tenant %s seq %d: %s: %s", f.Tenant, f.Seq, f.Reason, f.Detail)
}

// Head is a chain position: the seq of an event and its hash. The zero Head
// (seq 0, no hash) is the position before the genesis.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash []byte `json:"-"`
}

// HashHex is the head's hash in lowercase hex ("" for the zero head).
func (h Head) HashHex() string { return hex.EncodeToString(h.Hash) }

// IsZero reports whether h is the position before the genesis.
func (h Head) IsZero() bool { return h.Seq == 0 }

func (h Head) String() string {
	if h.IsZero() {
		return "seq 0 (before genesis)"
	}
	return fmt.Sprintf("seq %d hash %s", h.Seq, h.HashHex())
}

// ChainResult is what the verifier learned about one chain once every event
// it read for that chain was fully checked (links and signatures).
type ChainResult struct {
	Tenant uuid.UUID
	// From is the trusted head verification started after (zero: genesis).
	From Head
	// Last is the last event whose checks all passed; when Finding is nil it
	// is the verified head of the chain as read.
	Last Head
	// Events is how many events of this chain were read.
	Events int64
	// Finding is the first bad event, or nil.
	Finding *Finding
	// SignaturesSkipped is how many of its events' signatures were not
	// verified this run: the provider chain's events up to
	// Options.ProviderSigned, once the chain was confirmed to hash to it.
	SignaturesSkipped int64
}

// InvalidWitnessFindings turns the witnesses witness.Newest could not trust
// into bad-witness findings (an error that is not a *witness.InvalidError
// becomes one about the provider tenant, so nothing is dropped).
func InvalidWitnessFindings(bad []error) []Finding {
	out := make([]Finding, 0, len(bad))
	for _, err := range bad {
		var inv *witness.InvalidError
		if !errors.As(err, &inv) {
			out = append(out, Finding{Tenant: ProviderTenant, Reason: ReasonBadWitness, Detail: err.Error()})
			continue
		}
		out = append(out, Finding{Tenant: inv.Tenant, Seq: inv.Seq, Reason: ReasonBadWitness,
			Detail:   fmt.Sprintf("the witness at seq %d cannot be trusted: %s", inv.Seq, inv.Reason),
			Evidence: map[string]string{"witness_key": inv.Key}})
	}
	return out
}

package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// The outbox payloads (oml.outbox.payload, jsonb). They describe what the
// lake writer must do; the journal row (joined on tenant_id, journal_seq)
// and oml.claim_bodies hold the rest. See docs/schema.md.

// BronzePayload is the payload of a bronze.events append row.
type BronzePayload struct {
	EventType string `json:"event_type"`
}

// MaterializePayload is the payload of a silver.claims materialize row: the
// claim as folded at promotion. The body is read from oml.claim_bodies and
// must hash to CiphertextDigest.
type MaterializePayload struct {
	WorkareaID       string `json:"workarea_id"`
	Writer           string `json:"writer"`
	Principal        string `json:"principal"`
	Provenance       string `json:"provenance"`
	PlaintextDigest  string `json:"plaintext_digest"`
	CiphertextDigest string `json:"ciphertext_digest"`
	State            string `json:"state"`
	PromotedBy       string `json:"promoted_by"`
	SubmittedSeq     int64  `json:"submitted_seq"`
	PromotedSeq      int64  `json:"promoted_seq"`
}

// RetractPayload is the payload of a silver.claims retract row.
type RetractPayload struct {
	State  string `json:"state"`
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

func jsonObj(k, v string) []byte {
	b, _ := json.Marshal(map[string]string{k: v})
	return b
}

func materializePayload(c *Claim) []byte {
	b, _ := json.Marshal(MaterializePayload{
		WorkareaID: c.WorkareaID, Writer: c.Writer, Principal: c.Principal, Provenance: c.Provenance,
		PlaintextDigest: hex.EncodeToString(c.PlaintextDigest), CiphertextDigest: hex.EncodeToString(c.CiphertextDigest),
		State: c.State, PromotedBy: *c.PromotedBy, SubmittedSeq: c.SubmittedSeq, PromotedSeq: *c.PromotedSeq,
	})
	return b
}

func retractPayload(state, by, reason string) []byte {
	b, _ := json.Marshal(RetractPayload{State: state, By: by, Reason: reason})
	return b
}

func keyIDOf(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:16])
}

func sortClaims(cs []*Claim) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Version < cs[j].Version })
}

// LineagePayload is the payload of a gold.lineage row: one change to one
// promoted claim (op materialize: its promotion; op retract: a later
// demotion, erasure, reassignment or simulation end), as the fold saw it.
// Digests and attribution only, never a body. The event's type, hash and
// time come from the journal row it cites. PrevSeq is the journal seq of
// the claim's previous change (its submission, for a promotion), so the
// rows of one claim form a chain the lake writer checks link by link.
type LineagePayload struct {
	Actor            string `json:"actor"`
	Reason           string `json:"reason,omitempty"`
	StateBefore      string `json:"state_before"`
	StateAfter       string `json:"state_after"`
	WorkareaID       string `json:"workarea_id"`
	ToWorkareaID     string `json:"to_workarea_id,omitempty"`
	Writer           string `json:"writer"`
	Principal        string `json:"principal"`
	Provenance       string `json:"provenance"`
	PlaintextDigest  string `json:"plaintext_digest"`
	CiphertextDigest string `json:"ciphertext_digest"`
	SubmittedSeq     int64  `json:"submitted_seq"`
	PrevSeq          int64  `json:"prev_seq"`
}

func lineagePayload(c *Claim, before, actor, reason, to string, prevSeq int64) []byte {
	b, _ := json.Marshal(LineagePayload{
		Actor: actor, Reason: reason, StateBefore: before, StateAfter: c.State,
		WorkareaID: c.WorkareaID, ToWorkareaID: to, Writer: c.Writer, Principal: c.Principal, Provenance: c.Provenance,
		PlaintextDigest: hex.EncodeToString(c.PlaintextDigest), CiphertextDigest: hex.EncodeToString(c.CiphertextDigest),
		SubmittedSeq: c.SubmittedSeq, PrevSeq: prevSeq,
	})
	return b
}

package bundle

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/witness"
)

// Format and Version name the bundle format in its header.
const (
	Format  = "oml-chain-bundle"
	Version = 1
)

// Line kinds.
const (
	KindHeader  = "header"
	KindEvent   = "event"
	KindWitness = "witness"
	KindTrailer = "trailer"
)

// Header is the first line.
type Header struct {
	Kind       string    `json:"kind"`
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	Tenant     uuid.UUID `json:"tenant_id"`
	TenantName string    `json:"tenant,omitempty"`
	// FromSeq is the first tenant event in the bundle (1: the genesis).
	FromSeq int64 `json:"from_seq"`
	// Anchor is the event before FromSeq (nil when FromSeq is 1): the
	// segment is proven to extend it, nothing more.
	Anchor     *Anchor   `json:"anchor,omitempty"`
	ExportedAt time.Time `json:"exported_at"`
	// RootKeyID is the provider chain's root key as exported: informative
	// only; a verifier pins the root from outside the bundle.
	RootKeyID string `json:"root_key_id"`
}

// Anchor is a (seq, hash) the segment links to.
type Anchor struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"` // lowercase hex
}

// EventLine is one stored journal row.
type EventLine struct {
	Kind       string    `json:"kind"`
	Tenant     uuid.UUID `json:"tenant_id"`
	Seq        int64     `json:"seq"`
	PrevHash   string    `json:"prev_hash"` // lowercase hex
	Hash       string    `json:"hash"`      // lowercase hex
	Signature  string    `json:"signature"` // standard base64
	KeyID      string    `json:"key_id"`
	EventType  string    `json:"event_type"`
	Payload    string    `json:"payload"` // standard base64 of the exact signed bytes
	RecordedAt time.Time `json:"recorded_at"`
}

// WitnessLine is one signed head of the tenant (witness.Head as stored),
// with where it came from.
type WitnessLine struct {
	Kind   string        `json:"kind"`
	Source string        `json:"source"` // "lake" (published) or "export" (signed at export)
	Head   *witness.Head `json:"head"`
}

// Trailer is the last line: what a complete bundle holds.
type Trailer struct {
	Kind           string `json:"kind"`
	ProviderEvents int64  `json:"provider_events"`
	Events         int64  `json:"events"`
	Witnesses      int    `json:"witnesses"`
	// ToSeq/ToHash: the tenant's last event in the bundle.
	ToSeq  int64  `json:"to_seq"`
	ToHash string `json:"to_hash"`
}

// FromRow turns a verifier event into its line.
func FromRow(e *chainverify.Event) EventLine {
	return EventLine{Kind: KindEvent, Tenant: e.Tenant, Seq: e.Seq, PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash),
		Signature: base64.StdEncoding.EncodeToString(e.Signature), KeyID: e.KeyID, EventType: e.EventType,
		Payload: base64.StdEncoding.EncodeToString(e.Payload), RecordedAt: e.RecordedAt.UTC()}
}

// Row decodes a line back into a verifier event. Malformed encodings are
// errors of the bundle (the file), not findings.
func (l EventLine) Row() (*chainverify.Event, error) {
	var err error
	ev := &chainverify.Event{Tenant: l.Tenant, Seq: l.Seq, KeyID: l.KeyID, EventType: l.EventType, RecordedAt: l.RecordedAt}
	if ev.PrevHash, err = hex.DecodeString(l.PrevHash); err != nil {
		return nil, fmt.Errorf("event %s seq %d: prev_hash is not hex", l.Tenant, l.Seq)
	}
	if ev.Hash, err = hex.DecodeString(l.Hash); err != nil {
		return nil, fmt.Errorf("event %s seq %d: hash is not hex", l.Tenant, l.Seq)
	}
	if ev.Signature, err = base64.StdEncoding.DecodeString(l.Signature); err != nil {
		return nil, fmt.Errorf("event %s seq %d: signature is not base64", l.Tenant, l.Seq)
	}
	if ev.Payload, err = base64.StdEncoding.DecodeString(l.Payload); err != nil {
		return nil, fmt.Errorf("event %s seq %d: payload is not base64", l.Tenant, l.Seq)
	}
	return ev, nil
}

// Writer writes a bundle line by line.
type Writer struct {
	w        *bufio.Writer
	enc      *json.Encoder
	trailer  Trailer
	tenant   uuid.UUID
	provider bool // still writing the provider chain
}

// NewWriter writes h as the header.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	bwr := &Writer{w: bw, enc: json.NewEncoder(bw), tenant: h.Tenant, provider: true}
	h.Kind, h.Format, h.Version = KindHeader, Format, Version
	h.ExportedAt = h.ExportedAt.UTC()
	return bwr, bwr.enc.Encode(h)
}

// Event writes one event (the provider chain's first, then the tenant's).
func (w *Writer) Event(e *chainverify.Event) error {
	switch {
	case e.Tenant == chainverify.ProviderTenant && w.tenant != chainverify.ProviderTenant:
		if !w.provider {
			return errors.New("bundle: a provider event after the tenant's events")
		}
		w.trailer.ProviderEvents++
	case e.Tenant == w.tenant:
		w.provider = false
		w.trailer.Events++
		w.trailer.ToSeq, w.trailer.ToHash = e.Seq, hex.EncodeToString(e.Hash)
	default:
		return fmt.Errorf("bundle: an event of tenant %s in a bundle of %s", e.Tenant, w.tenant)
	}
	return w.enc.Encode(FromRow(e))
}

// Witness writes one signed head of the tenant.
func (w *Writer) Witness(source string, h *witness.Head) error {
	w.provider = false
	w.trailer.Witnesses++
	return w.enc.Encode(WitnessLine{Kind: KindWitness, Source: source, Head: h})
}

// Close writes the trailer and flushes.
func (w *Writer) Close() (Trailer, error) {
	w.trailer.Kind = KindTrailer
	if err := w.enc.Encode(w.trailer); err != nil {
		return w.trailer, err
	}
	return w.trailer, w.w.Flush()
}

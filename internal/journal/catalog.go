package journal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
)

// Type is a journal event type (the envelope's event_type).
type Type string

// The event catalog (docs/events.md).
const (
	TypeKeyIssued            Type = "key.issued"
	TypeTenantCreated        Type = "tenant.created"
	TypeTenantGenesis        Type = "tenant.genesis"
	TypeClaimSubmitted       Type = "claim.submitted"
	TypeClaimPromoted        Type = "claim.promoted"
	TypeClaimDemoted         Type = "claim.demoted"
	TypeClaimErased          Type = "claim.erased"
	TypeClaimReassigned      Type = "claim.reassigned"
	TypeSimulationEnded      Type = "simulation.ended"
	TypeMaterializeSkipped   Type = "materialize.skipped"
	TypeDeadletterReenqueued Type = "deadletter.reenqueued"
	TypeDeadletterAbandoned  Type = "deadletter.abandoned"
	TypeKeyRevoked           Type = "key.revoked"
	TypeChainTailRestored    Type = "chain.tail_restored"
	TypeChainForkAccepted    Type = "chain.fork_accepted"
	TypeLakeRepaired         Type = "lake.repaired"
)

// Types lists every event type in catalog order.
var Types = []Type{
	TypeKeyIssued, TypeTenantCreated, TypeTenantGenesis, TypeClaimSubmitted,
	TypeClaimPromoted, TypeClaimDemoted, TypeClaimErased, TypeClaimReassigned,
	TypeSimulationEnded, TypeMaterializeSkipped, TypeDeadletterReenqueued,
	TypeDeadletterAbandoned, TypeKeyRevoked,
	TypeChainTailRestored, TypeChainForkAccepted, TypeLakeRepaired,
}

// ProviderOnly reports whether t may only appear on the provider chain.
func (t Type) ProviderOnly() bool {
	return t == TypeKeyIssued || t == TypeTenantCreated || t == TypeKeyRevoked || t == TypeChainForkAccepted
}

// OnProvider reports whether t may appear on the provider chain: the
// provider-only types, chain.tail_restored (any chain can lose a tail) and
// lake.repaired (the provider tenant has a bronze table too).
func (t Type) OnProvider() bool {
	return t.ProviderOnly() || t == TypeChainTailRestored || t == TypeLakeRepaired
}

// Payload is one event type's payload struct. Every field is a digest, an
// id or attribution: never body plaintext or ciphertext.
type Payload interface {
	EventType() Type
	Validate() error
}

// ClaimRef names one claim (one version of an artifact).
type ClaimRef struct {
	ArtifactID string `json:"artifact_id"`
	Version    int    `json:"version"`
}

// KeyIssued registers a signing key on the provider chain. The provider
// chain's seq 1 is the root key.issued, signed by the key it issues.
type KeyIssued struct {
	KeyID     string `json:"key_id"`     // lowercase hex, 32 chars
	Algorithm string `json:"algorithm"`  // "ed25519"
	PublicKey string `json:"public_key"` // standard base64 of the 32-byte key
	Role      string `json:"role"`       // "root" for the deployment key
}

// TenantCreated, on the provider chain, creates a tenant.
type TenantCreated struct {
	TenantID string `json:"tenant_id"` // UUID
	Name     string `json:"name"`
}

// TenantGenesis opens a tenant's chain (seq 1) and references the provider
// chain's tenant.created event that made the tenant.
type TenantGenesis struct {
	TenantID     string `json:"tenant_id"`
	Name         string `json:"name"`
	ProviderSeq  uint64 `json:"provider_seq"`
	ProviderHash string `json:"provider_hash"` // lowercase hex of the event hash
}

// ClaimSubmitted admits a claim into the held state. The body itself (the
// AES-256-GCM ciphertext) and its data key travel beside the event, never
// in it.
type ClaimSubmitted struct {
	ArtifactID       string `json:"artifact_id"`
	Version          int    `json:"version"`
	WorkareaID       string `json:"workarea_id"`
	Writer           string `json:"writer"`
	Principal        string `json:"principal"`
	Provenance       string `json:"provenance"`
	PlaintextDigest  string `json:"plaintext_digest"`  // hex SHA-256 of the plaintext
	CiphertextDigest string `json:"ciphertext_digest"` // hex SHA-256 of the stored ciphertext
}

// ClaimPromoted makes a held claim visible (and materializes it into
// silver.claims). By must differ from the claim's writer.
type ClaimPromoted struct {
	ArtifactID string `json:"artifact_id"`
	Version    int    `json:"version"`
	By         string `json:"by"`
}

// ClaimDemoted withdraws a held or promoted claim.
type ClaimDemoted struct {
	ArtifactID string `json:"artifact_id"`
	Version    int    `json:"version"`
	By         string `json:"by"`
	Reason     string `json:"reason,omitempty"`
}

// ClaimErased erases every version of an artifact: its data key is
// destroyed in the same transaction (crypto-shredding).
type ClaimErased struct {
	ArtifactID string `json:"artifact_id"`
	By         string `json:"by"`
	Reason     string `json:"reason,omitempty"`
}

// ClaimReassigned retires one claim version because it was moved to
// another workarea (the new home gets its own submission).
type ClaimReassigned struct {
	ArtifactID   string `json:"artifact_id"`
	Version      int    `json:"version"`
	By           string `json:"by"`
	ToWorkareaID string `json:"to_workarea_id"`
	Reason       string `json:"reason,omitempty"`
}

// SimulationEnded ends a simulation: every listed claim (all of provenance
// "simulation") moves to simulation_ended. The list is explicit so the
// signed event says exactly which claims it ended.
type SimulationEnded struct {
	SimulationID string     `json:"simulation_id"`
	By           string     `json:"by"`
	Claims       []ClaimRef `json:"claims"`
}

// MaterializeSkipped records that the lake writer gave up on an outbox row
// after its retry budget; the row moves to oml.dead_letter in the same
// transaction.
type MaterializeSkipped struct {
	OutboxSeq  int64  `json:"outbox_seq"`
	JournalSeq int64  `json:"journal_seq"`
	Target     string `json:"target"`
	Op         string `json:"op"`
	ArtifactID string `json:"artifact_id,omitempty"`
	Version    int    `json:"version,omitempty"`
	Attempts   int    `json:"attempts"`
	Error      string `json:"error"`
	By         string `json:"by"`
}

// DeadletterReenqueued puts a dead-lettered row back into the outbox (as a
// new outbox row) in the same transaction.
type DeadletterReenqueued struct {
	DeadLetterID int64  `json:"dead_letter_id"`
	OutboxSeq    int64  `json:"outbox_seq"` // the original row's seq
	By           string `json:"by"`
	Reason       string `json:"reason,omitempty"`
}

// KeyRevoked, on the provider chain, stops trusting a signing key. Heads
// are every chain's head when the revocation was made (read under the
// provider chain's lock, in the revocation's own transaction): an event
// signed by the revoked key at a seq above its chain's head here — or on a
// chain not listed, at any seq — is a finding (revoked-key); events at or
// below stay valid, so a chain verifies across a rotation and a stolen key
// cannot back-fill. The provider chain's own point is the revocation's seq.
// It must be signed by another key that is still valid (rotate first).
type KeyRevoked struct {
	KeyID  string        `json:"key_id"`
	By     string        `json:"by"`
	Reason string        `json:"reason"`
	Heads  []RevokedHead `json:"heads"`
}

// RevokedHead is one chain's head at a revocation.
type RevokedHead struct {
	TenantID string `json:"tenant_id"`
	Seq      int64  `json:"seq"`
	Hash     string `json:"hash"` // lowercase hex
}

func (KeyRevoked) EventType() Type { return TypeKeyRevoked }

// DeadletterAbandoned accepts, for good, that a dead-lettered row will never
// reach the lake (its held body is gone and cannot be restored): the dead
// letter is closed, reconcile lists it as an accepted gap, and it can no
// longer be re-enqueued. It goes on the dead letter's tenant chain (the
// provider chain for a row whose tenant has no chain).
type DeadletterAbandoned struct {
	DeadLetterID int64  `json:"dead_letter_id"`
	OutboxSeq    int64  `json:"outbox_seq"` // the dead-lettered row's seq
	By           string `json:"by"`
	Reason       string `json:"reason"`
}

func (DeadletterAbandoned) EventType() Type { return TypeDeadletterAbandoned }

// LakeRepaired, on the chain of the tenant whose Delta tables `oml lake
// repair` changed (the provider chain for the provider's bronze table),
// records one repair run: the digest of the plan it computed, and for
// every table commit it made, what it did and why. Every commit a repair
// makes is named by exactly one lake.repaired event (a re-run after a
// crash journals the commits an earlier run left unjournalled, with that
// run's plan digest per table). The rows a repair removed are in the
// archive under the lake root that Archive names.
type LakeRepaired struct {
	PlanDigest string           `json:"plan_digest"`
	Tables     []RepairedTable  `json:"tables"`
	Counts     map[string]int64 `json:"counts"`
	By         string           `json:"by"`
}

// RepairedTable is one repair commit of one table.
type RepairedTable struct {
	Table        string           `json:"table"`         // bronze.events | silver.claims | gold.lineage | gold.workareas
	Action       string           `json:"action"`        // rewind | rebuild | rewrite
	DeltaVersion int64            `json:"delta_version"` // the repair's Delta commit
	TxnVersion   int64            `json:"txn_version"`   // the table's lake-writer txn version after it
	PlanDigest   string           `json:"plan_digest"`   // the plan that made this commit
	Classes      map[string]int64 `json:"classes"`       // findings repaired, by class
	RowsRemoved  int64            `json:"rows_removed"`
	RowsAdded    int64            `json:"rows_added"`
	Archive      string           `json:"archive"` // the archive manifest's key under the lake root
	// TenantID names the table's tenant when it is not the chain's own:
	// a tenant of a lost timeline (created only in a history the
	// database no longer has) has no chain, so the removal of its tables
	// is journalled on the provider chain, which held its tenant.created.
	TenantID string `json:"tenant_id,omitempty"`
}

func (LakeRepaired) EventType() Type { return TypeLakeRepaired }

// ChainTailRestored, on the chain it restores, records that the events
// FromSeq..ToSeq (ToHash the last one's hash), lost by a failover or a
// restore, were re-inserted from the lake's bronze.events after each was
// verified (`oml chain restore-tail`). BodyLost lists the claims submitted
// in the lost tail that were still held: their bodies never reach the lake,
// so they came back held without a body ("body lost"); they stay held.
type ChainTailRestored struct {
	FromSeq    int64      `json:"from_seq"`
	ToSeq      int64      `json:"to_seq"`
	ToHash     string     `json:"to_hash"`
	Source     string     `json:"source"` // "bronze"
	OutboxRows int        `json:"outbox_rows"`
	BodyLost   []ClaimRef `json:"body_lost,omitempty"`
	By         string     `json:"by"`
}

// LostHead is a head of a lost timeline as a witness or bronze saw it.
type LostHead struct {
	Source string `json:"source"` // "witness" | "bronze"
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"` // lowercase hex
}

// ChainForkAccepted, on the provider chain, records that the journal of
// TenantID forked from (or lost) the history its witness and/or bronze
// table saw, and that the journal wins: the lost heads stay listed for
// ever, verify and the fork check report them as accepted instead of
// failing. SharedSeq is the last seq both histories agree on (-1 when it
// could not be determined); NewSeq/NewHash the journal head at acceptance.
type ChainForkAccepted struct {
	TenantID  string     `json:"tenant_id"`
	Lost      []LostHead `json:"lost"`
	SharedSeq int64      `json:"shared_seq"`
	NewSeq    int64      `json:"new_seq"`
	NewHash   string     `json:"new_hash"`
	Reason    string     `json:"reason"`
	By        string     `json:"by"`
}

func (KeyIssued) EventType() Type            { return TypeKeyIssued }
func (ChainTailRestored) EventType() Type    { return TypeChainTailRestored }
func (ChainForkAccepted) EventType() Type    { return TypeChainForkAccepted }
func (TenantCreated) EventType() Type        { return TypeTenantCreated }
func (TenantGenesis) EventType() Type        { return TypeTenantGenesis }
func (ClaimSubmitted) EventType() Type       { return TypeClaimSubmitted }
func (ClaimPromoted) EventType() Type        { return TypeClaimPromoted }
func (ClaimDemoted) EventType() Type         { return TypeClaimDemoted }
func (ClaimErased) EventType() Type          { return TypeClaimErased }
func (ClaimReassigned) EventType() Type      { return TypeClaimReassigned }
func (SimulationEnded) EventType() Type      { return TypeSimulationEnded }
func (MaterializeSkipped) EventType() Type   { return TypeMaterializeSkipped }
func (DeadletterReenqueued) EventType() Type { return TypeDeadletterReenqueued }

var (
	keyIDRE   = regexp.MustCompile(`^[0-9a-f]{32}$`)
	digestRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	classRE   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	targetsOK = map[string]bool{"bronze.events": true, "silver.claims": true, "gold.lineage": true, "gold.workareas": true}
	opsOK     = map[string]bool{"append": true, "materialize": true, "retract": true}
)

// ProvenanceSimulation is the provenance class simulation.ended applies to.
const ProvenanceSimulation = "simulation"

func need(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is required", field)
	}
	if len(v) > 512 {
		return fmt.Errorf("%s is longer than 512 bytes", field)
	}
	return nil
}

func needRef(artifact string, version int) error {
	if err := need("artifact_id", artifact); err != nil {
		return err
	}
	if version < 1 {
		return fmt.Errorf("version must be 1 or more, got %d", version)
	}
	return nil
}

func (p KeyIssued) Validate() error {
	if !keyIDRE.MatchString(p.KeyID) {
		return errors.New("key_id must be 32 lowercase hex characters")
	}
	if p.Algorithm != "ed25519" {
		return fmt.Errorf("algorithm must be ed25519, got %q", p.Algorithm)
	}
	if b, err := base64.StdEncoding.DecodeString(p.PublicKey); err != nil || len(b) != 32 {
		return errors.New("public_key must be the standard base64 of a 32-byte ed25519 key")
	}
	return need("role", p.Role)
}

// TenantNameRE is the tenant naming rule: 1-63 characters of a-z, 0-9,
// '.', '_' or '-', starting with a letter or digit (so never "_provider").
var TenantNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func (p TenantCreated) Validate() error {
	if _, err := uuid.Parse(p.TenantID); err != nil {
		return fmt.Errorf("tenant_id %q is not a UUID", p.TenantID)
	}
	if !TenantNameRE.MatchString(p.Name) {
		return fmt.Errorf("tenant name %q breaks the naming rule (1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit)", p.Name)
	}
	return nil
}

func (p TenantGenesis) Validate() error {
	if _, err := uuid.Parse(p.TenantID); err != nil {
		return fmt.Errorf("tenant_id %q is not a UUID", p.TenantID)
	}
	if p.ProviderSeq < 1 {
		return errors.New("provider_seq must be 1 or more")
	}
	if !digestRE.MatchString(p.ProviderHash) {
		return errors.New("provider_hash must be 64 lowercase hex characters")
	}
	return need("name", p.Name)
}

func (p ClaimSubmitted) Validate() error {
	if err := needRef(p.ArtifactID, p.Version); err != nil {
		return err
	}
	for _, f := range [][2]string{{"workarea_id", p.WorkareaID}, {"writer", p.Writer}, {"principal", p.Principal}} {
		if err := need(f[0], f[1]); err != nil {
			return err
		}
	}
	if !classRE.MatchString(p.Provenance) {
		return fmt.Errorf("provenance %q must be a lowercase class name such as human, agent, import or simulation", p.Provenance)
	}
	if !digestRE.MatchString(p.PlaintextDigest) || !digestRE.MatchString(p.CiphertextDigest) {
		return errors.New("plaintext_digest and ciphertext_digest must be 64 lowercase hex characters (SHA-256)")
	}
	return nil
}

func (p ClaimPromoted) Validate() error {
	if err := needRef(p.ArtifactID, p.Version); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p ClaimDemoted) Validate() error {
	if err := needRef(p.ArtifactID, p.Version); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p ClaimErased) Validate() error {
	if err := need("artifact_id", p.ArtifactID); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p ClaimReassigned) Validate() error {
	if err := needRef(p.ArtifactID, p.Version); err != nil {
		return err
	}
	if err := need("to_workarea_id", p.ToWorkareaID); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p SimulationEnded) Validate() error {
	if err := need("simulation_id", p.SimulationID); err != nil {
		return err
	}
	if err := need("by", p.By); err != nil {
		return err
	}
	if len(p.Claims) == 0 {
		return errors.New("claims must list at least one claim")
	}
	seen := map[ClaimRef]bool{}
	for _, c := range p.Claims {
		if err := needRef(c.ArtifactID, c.Version); err != nil {
			return err
		}
		if seen[c] {
			return fmt.Errorf("claim %s v%d is listed twice", c.ArtifactID, c.Version)
		}
		seen[c] = true
	}
	return nil
}

func (p MaterializeSkipped) Validate() error {
	if p.OutboxSeq < 1 {
		return errors.New("outbox_seq must be 1 or more")
	}
	if !targetsOK[p.Target] || !opsOK[p.Op] {
		return fmt.Errorf("target %q / op %q is not a known outbox target and op", p.Target, p.Op)
	}
	if err := need("error", p.Error); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p KeyRevoked) Validate() error {
	if !keyIDRE.MatchString(p.KeyID) {
		return errors.New("key_id must be 32 lowercase hex characters")
	}
	if err := need("by", p.By); err != nil {
		return err
	}
	if err := need("reason", p.Reason); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, h := range p.Heads {
		id, err := uuid.Parse(h.TenantID)
		if err != nil || id.String() != h.TenantID {
			return fmt.Errorf("heads: tenant_id %q is not a lowercase UUID", h.TenantID)
		}
		if h.Seq < 1 || !digestRE.MatchString(h.Hash) {
			return fmt.Errorf("heads: tenant %s needs a seq of 1 or more and a 64-hex hash", h.TenantID)
		}
		if seen[h.TenantID] {
			return fmt.Errorf("heads: tenant %s is listed twice", h.TenantID)
		}
		seen[h.TenantID] = true
	}
	return nil
}

func (p DeadletterAbandoned) Validate() error {
	if p.DeadLetterID < 1 || p.OutboxSeq < 1 {
		return errors.New("dead_letter_id and outbox_seq must be 1 or more")
	}
	if err := need("by", p.By); err != nil {
		return err
	}
	return need("reason", p.Reason)
}

func (p LakeRepaired) Validate() error {
	if !digestRE.MatchString(p.PlanDigest) {
		return errors.New("plan_digest must be 64 lowercase hex characters")
	}
	if len(p.Tables) == 0 {
		return errors.New("tables must name at least one repaired table")
	}
	seen := map[string]bool{}
	for _, t := range p.Tables {
		switch t.Table {
		case TargetBronzeEvents, TargetSilverClaims, TargetGoldLineage, TargetGoldWorkareas:
		default:
			return fmt.Errorf("table %q is not bronze.events, silver.claims, gold.lineage or gold.workareas", t.Table)
		}
		switch t.Action {
		case "rewind", "rebuild", "rewrite", "remove":
		default:
			return fmt.Errorf("action %q is not rewind, rebuild, rewrite or remove", t.Action)
		}
		if t.TenantID != "" {
			if _, err := uuid.Parse(t.TenantID); err != nil {
				return fmt.Errorf("%s: tenant_id %q is not a tenant id", t.Table, t.TenantID)
			}
		}
		if t.DeltaVersion < 1 || t.TxnVersion < 0 || t.RowsRemoved < 0 || t.RowsAdded < 0 {
			return fmt.Errorf("%s: delta_version must be 1 or more, txn_version and row counts not negative", t.Table)
		}
		if !digestRE.MatchString(t.PlanDigest) {
			return fmt.Errorf("%s: plan_digest must be 64 lowercase hex characters", t.Table)
		}
		key := fmt.Sprintf("%s/%s@%d", t.TenantID, t.Table, t.DeltaVersion)
		if seen[key] {
			return fmt.Errorf("%s version %d is listed twice", t.Table, t.DeltaVersion)
		}
		seen[key] = true
		if err := need("archive", t.Archive); err != nil {
			return fmt.Errorf("%s: %w", t.Table, err)
		}
	}
	return need("by", p.By)
}

func (p ChainTailRestored) Validate() error {
	if p.FromSeq < 1 || p.ToSeq < p.FromSeq {
		return fmt.Errorf("from_seq %d and to_seq %d must be 1 or more and in order", p.FromSeq, p.ToSeq)
	}
	if !digestRE.MatchString(p.ToHash) {
		return errors.New("to_hash must be 64 lowercase hex characters")
	}
	if p.Source != "bronze" {
		return fmt.Errorf("source must be bronze, got %q", p.Source)
	}
	if p.OutboxRows < 0 {
		return errors.New("outbox_rows must not be negative")
	}
	seen := map[ClaimRef]bool{}
	for _, c := range p.BodyLost {
		if err := needRef(c.ArtifactID, c.Version); err != nil {
			return err
		}
		if seen[c] {
			return fmt.Errorf("claim %s v%d is listed twice", c.ArtifactID, c.Version)
		}
		seen[c] = true
	}
	return need("by", p.By)
}

func (p ChainForkAccepted) Validate() error {
	if _, err := uuid.Parse(p.TenantID); err != nil {
		return fmt.Errorf("tenant_id %q is not a UUID", p.TenantID)
	}
	if len(p.Lost) == 0 {
		return errors.New("lost must name at least one lost head")
	}
	for _, l := range p.Lost {
		if l.Source != "witness" && l.Source != "bronze" {
			return fmt.Errorf("lost head source must be witness or bronze, got %q", l.Source)
		}
		if l.Seq < 1 || !digestRE.MatchString(l.Hash) {
			return errors.New("a lost head needs a seq of 1 or more and a 64-character lowercase hex hash")
		}
	}
	if p.SharedSeq < -1 || p.NewSeq < 0 || (p.NewSeq > 0 && !digestRE.MatchString(p.NewHash)) {
		return errors.New("shared_seq, new_seq and new_hash are malformed")
	}
	if err := need("reason", p.Reason); err != nil {
		return err
	}
	return need("by", p.By)
}

func (p DeadletterReenqueued) Validate() error {
	if p.DeadLetterID < 1 || p.OutboxSeq < 1 {
		return errors.New("dead_letter_id and outbox_seq must be 1 or more")
	}
	return need("by", p.By)
}

// Event is one event ready to append: its type, the exact payload bytes
// that will be signed and stored, and the side data the fold needs that
// the journal must never hold (a submission's ciphertext body and data key).
type Event struct {
	Type    Type
	Payload []byte
	// Body is the AES-256-GCM ciphertext of a claim.submitted, stored in
	// oml.claim_bodies; SHA-256(Body) must equal the journalled
	// ciphertext_digest.
	Body []byte
	// DataKey is the artifact's 32-byte data key (claim.submitted only).
	// Stored in oml.claim_keys for a new artifact; must equal the stored one
	// for a further version.
	DataKey []byte

	decoded Payload
}

// Decoded is the parsed payload.
func (e Event) Decoded() Payload { return e.decoded }

// New encodes p as an event. Use NewClaimSubmitted for submissions.
func New(p Payload) (Event, error) {
	if p.EventType() == TypeClaimSubmitted {
		return Event{}, errors.New("claim.submitted needs its body and data key: use journal.NewClaimSubmitted")
	}
	return encode(p)
}

// MustNew is New for payloads built by code, panicking on invalid input.
func MustNew(p Payload) Event {
	e, err := New(p)
	if err != nil {
		panic(err)
	}
	return e
}

// NewClaimSubmitted encodes a submission with its ciphertext body and the
// artifact's data key.
func NewClaimSubmitted(p ClaimSubmitted, ciphertext, dataKey []byte) (Event, error) {
	e, err := encode(p)
	if err != nil {
		return Event{}, err
	}
	if len(dataKey) != 32 {
		return Event{}, fmt.Errorf("claim.submitted %s v%d: the data key must be 32 bytes (AES-256), got %d", p.ArtifactID, p.Version, len(dataKey))
	}
	if len(ciphertext) == 0 {
		return Event{}, fmt.Errorf("claim.submitted %s v%d: the ciphertext body is empty", p.ArtifactID, p.Version)
	}
	e.Body, e.DataKey = ciphertext, dataKey
	return e, nil
}

func encode(p Payload) (Event, error) {
	if err := p.Validate(); err != nil {
		return Event{}, fmt.Errorf("%s: %w", p.EventType(), err)
	}
	// encoding/json writes struct fields in declaration order with no
	// whitespace: the bytes are deterministic for a given value. They are
	// signed as produced and never re-serialized.
	b, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("%s: encode payload: %w", p.EventType(), err)
	}
	return Event{Type: p.EventType(), Payload: b, decoded: p}, nil
}

// Decode parses a stored payload of type t (strictly: unknown fields are an
// error) and validates it.
func Decode(t Type, payload []byte) (Payload, error) {
	var p Payload
	switch t {
	case TypeKeyIssued:
		p = &KeyIssued{}
	case TypeTenantCreated:
		p = &TenantCreated{}
	case TypeTenantGenesis:
		p = &TenantGenesis{}
	case TypeClaimSubmitted:
		p = &ClaimSubmitted{}
	case TypeClaimPromoted:
		p = &ClaimPromoted{}
	case TypeClaimDemoted:
		p = &ClaimDemoted{}
	case TypeClaimErased:
		p = &ClaimErased{}
	case TypeClaimReassigned:
		p = &ClaimReassigned{}
	case TypeSimulationEnded:
		p = &SimulationEnded{}
	case TypeMaterializeSkipped:
		p = &MaterializeSkipped{}
	case TypeDeadletterReenqueued:
		p = &DeadletterReenqueued{}
	case TypeDeadletterAbandoned:
		p = &DeadletterAbandoned{}
	case TypeKeyRevoked:
		p = &KeyRevoked{}
	case TypeChainTailRestored:
		p = &ChainTailRestored{}
	case TypeChainForkAccepted:
		p = &ChainForkAccepted{}
	case TypeLakeRepaired:
		p = &LakeRepaired{}
	default:
		return nil, fmt.Errorf("unknown event type %q", t)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%s payload: %w", t, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s payload: trailing data after the JSON object", t)
	}
	// Return the value, not the pointer, so callers type-switch on values.
	v := deref(p)
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("%s payload: %w", t, err)
	}
	return v, nil
}

func deref(p Payload) Payload {
	switch v := p.(type) {
	case *KeyIssued:
		return *v
	case *TenantCreated:
		return *v
	case *TenantGenesis:
		return *v
	case *ClaimSubmitted:
		return *v
	case *ClaimPromoted:
		return *v
	case *ClaimDemoted:
		return *v
	case *ClaimErased:
		return *v
	case *ClaimReassigned:
		return *v
	case *SimulationEnded:
		return *v
	case *MaterializeSkipped:
		return *v
	case *DeadletterReenqueued:
		return *v
	case *DeadletterAbandoned:
		return *v
	case *KeyRevoked:
		return *v
	case *ChainTailRestored:
		return *v
	case *ChainForkAccepted:
		return *v
	case *LakeRepaired:
		return *v
	}
	return p
}

// hexDigest decodes a validated 64-char hex digest.
func hexDigest(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// Prepared returns e with its payload parsed and validated (a no-op for an
// event built by New or NewClaimSubmitted). Events read back from storage
// or built from raw bytes go through it before being appended.
func (e Event) Prepared() (Event, error) {
	if e.decoded != nil {
		return e, nil
	}
	d, err := Decode(e.Type, e.Payload)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	// One meaning per byte string: JSON decoding tolerates other spellings
	// (field-name case, whitespace, duplicate keys), so only the canonical
	// encoding this package produces may be signed.
	if canon, err := json.Marshal(d); err != nil || !bytes.Equal(canon, e.Payload) {
		return Event{}, fmt.Errorf("%w: the %s payload is not in canonical form (build events with journal.New)", ErrRejected, e.Type)
	}
	e.decoded = d
	return e, nil
}

package tables

import (
	"sort"
	"time"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
)

// Rows. Each table has a typed row (BronzeRow, SilverRow, GoldLineageRow,
// GoldWorkareaRow), its
// columns as constants whose value is the column's position in the schema
// and in a full pq.Row, the mapping to a Parquet row (Row) and back
// (Decode*, or a Projection for a scan of some columns). Readers use these
// and never a bare index: adding a column is then a change here, and the
// tests of this package fail when the schema and the mapping disagree.

// BronzeCol is a column of bronze.events.
type BronzeCol int

// The columns of bronze.events, in schema order.
const (
	BronzeTenantID BronzeCol = iota
	BronzeSeq
	BronzeEventType
	BronzeRecordedAt
	BronzePrevHash
	BronzeHash
	BronzeSignature
	BronzeKeyID
	BronzePayload
	BronzeOutboxSeq
	bronzeColumns
)

// BronzeRow is one row of bronze.events: a journal event's full envelope
// (the exact payload included) and the outbox seq that carried it.
type BronzeRow struct {
	TenantID   string
	Seq        int64 // journal seq
	EventType  string
	RecordedAt time.Time
	PrevHash   []byte
	Hash       []byte
	Signature  []byte
	KeyID      string
	Payload    string
	OutboxSeq  int64
}

// Row is the row as written to Parquet, in schema order.
func (r BronzeRow) Row() pq.Row {
	return pq.Row{
		BronzeTenantID:   r.TenantID,
		BronzeSeq:        r.Seq,
		BronzeEventType:  r.EventType,
		BronzeRecordedAt: r.RecordedAt,
		BronzePrevHash:   r.PrevHash,
		BronzeHash:       r.Hash,
		BronzeSignature:  r.Signature,
		BronzeKeyID:      r.KeyID,
		BronzePayload:    r.Payload,
		BronzeOutboxSeq:  r.OutboxSeq,
	}
}

func (r *BronzeRow) set(c BronzeCol, v any) {
	switch c {
	case BronzeTenantID:
		r.TenantID = asString(v)
	case BronzeSeq:
		r.Seq = asInt64(v)
	case BronzeEventType:
		r.EventType = asString(v)
	case BronzeRecordedAt:
		r.RecordedAt = asTime(v)
	case BronzePrevHash:
		r.PrevHash = asBytes(v)
	case BronzeHash:
		r.Hash = asBytes(v)
	case BronzeSignature:
		r.Signature = asBytes(v)
	case BronzeKeyID:
		r.KeyID = asString(v)
	case BronzePayload:
		r.Payload = asString(v)
	case BronzeOutboxSeq:
		r.OutboxSeq = asInt64(v)
	}
}

// SilverCol is a column of silver.claims.
type SilverCol int

// The columns of silver.claims, in schema order.
const (
	SilverArtifactID SilverCol = iota
	SilverVersion
	SilverTenantID
	SilverWorkareaID
	SilverWriter
	SilverPrincipal
	SilverProvenance
	SilverPlaintextDigest
	SilverCiphertextDigest
	SilverBody
	SilverState
	SilverPromotedBy
	SilverSubmittedSeq
	SilverPromotedSeq
	SilverJournalSeq
	SilverOutboxSeq
	SilverUpdatedAt
	silverColumns
)

// SilverRow is one row of silver.claims: a promoted claim version, its
// held body (nil once erased: the column is null) and its current state.
type SilverRow struct {
	ArtifactID       string
	Version          int32
	TenantID         string
	WorkareaID       string
	Writer           string
	Principal        string
	Provenance       string
	PlaintextDigest  string
	CiphertextDigest string
	Body             []byte // nil: null (an erased claim's body)
	State            string
	PromotedBy       string
	SubmittedSeq     int64
	PromotedSeq      int64
	JournalSeq       int64 // the journal event of the row's last change
	OutboxSeq        int64 // the outbox row of the row's last change
	UpdatedAt        time.Time
}

// Row is the row as written to Parquet, in schema order.
func (r SilverRow) Row() pq.Row {
	var body any
	if r.Body != nil {
		body = r.Body
	}
	return pq.Row{
		SilverArtifactID:       r.ArtifactID,
		SilverVersion:          r.Version,
		SilverTenantID:         r.TenantID,
		SilverWorkareaID:       r.WorkareaID,
		SilverWriter:           r.Writer,
		SilverPrincipal:        r.Principal,
		SilverProvenance:       r.Provenance,
		SilverPlaintextDigest:  r.PlaintextDigest,
		SilverCiphertextDigest: r.CiphertextDigest,
		SilverBody:             body,
		SilverState:            r.State,
		SilverPromotedBy:       r.PromotedBy,
		SilverSubmittedSeq:     r.SubmittedSeq,
		SilverPromotedSeq:      r.PromotedSeq,
		SilverJournalSeq:       r.JournalSeq,
		SilverOutboxSeq:        r.OutboxSeq,
		SilverUpdatedAt:        r.UpdatedAt,
	}
}

func (r *SilverRow) set(c SilverCol, v any) {
	switch c {
	case SilverArtifactID:
		r.ArtifactID = asString(v)
	case SilverVersion:
		r.Version = asInt32(v)
	case SilverTenantID:
		r.TenantID = asString(v)
	case SilverWorkareaID:
		r.WorkareaID = asString(v)
	case SilverWriter:
		r.Writer = asString(v)
	case SilverPrincipal:
		r.Principal = asString(v)
	case SilverProvenance:
		r.Provenance = asString(v)
	case SilverPlaintextDigest:
		r.PlaintextDigest = asString(v)
	case SilverCiphertextDigest:
		r.CiphertextDigest = asString(v)
	case SilverBody:
		r.Body = asBytes(v)
	case SilverState:
		r.State = asString(v)
	case SilverPromotedBy:
		r.PromotedBy = asString(v)
	case SilverSubmittedSeq:
		r.SubmittedSeq = asInt64(v)
	case SilverPromotedSeq:
		r.PromotedSeq = asInt64(v)
	case SilverJournalSeq:
		r.JournalSeq = asInt64(v)
	case SilverOutboxSeq:
		r.OutboxSeq = asInt64(v)
	case SilverUpdatedAt:
		r.UpdatedAt = asTime(v)
	}
}

// SilverClaim reads the claim a full silver.claims row is of: its
// (artifact_id, version), the table's key (the lake writer's MERGE matches
// and sorts rows by it without decoding the rest).
func SilverClaim(row pq.Row) (artifactID string, version int32) {
	return asString(row[SilverArtifactID]), asInt32(row[SilverVersion])
}

// GoldLineageCol is a column of gold.lineage.
type GoldLineageCol int

// The columns of gold.lineage, in schema order.
const (
	LineageTenantID GoldLineageCol = iota
	LineageArtifactID
	LineageVersion
	LineageJournalSeq
	LineageEventType
	LineageEventHash
	LineageRecordedAt
	LineageActor
	LineageReason
	LineageStateBefore
	LineageStateAfter
	LineageWorkareaID
	LineageToWorkareaID
	LineageWriter
	LineagePrincipal
	LineageProvenance
	LineagePlaintextDigest
	LineageCiphertextDigest
	LineageSubmittedSeq
	LineagePrevJournalSeq
	LineageOutboxSeq
	lineageColumns
)

// GoldLineageRow is one row of gold.lineage: one change to one promoted
// claim (its promotion, or a later demotion, erasure, reassignment or
// simulation end), with the journal event that made it (seq, type, hash,
// time), who made it and why, the claim's state before and after, its
// attribution and digests. Never a body: lineage is digests and
// attribution only.
type GoldLineageRow struct {
	TenantID         string
	ArtifactID       string
	Version          int32
	JournalSeq       int64 // the event that made the change
	EventType        string
	EventHash        []byte // that event's hash (bronze.events.hash)
	RecordedAt       time.Time
	Actor            string // the event's "by": the promoter, demoter, ...
	Reason           string // the event's reason; a simulation end's simulation id
	StateBefore      string
	StateAfter       string
	WorkareaID       string // the claim's workarea (a reassignment's "from")
	ToWorkareaID     string // a reassignment's "to"; "": null
	Writer           string
	Principal        string
	Provenance       string
	PlaintextDigest  string
	CiphertextDigest string
	SubmittedSeq     int64 // the claim.submitted of the claim
	PrevJournalSeq   int64 // the claim's previous change (its submission, for a promotion)
	OutboxSeq        int64 // 0: null (a row re-derived after prune)
}

// Row is the row as written to Parquet, in schema order.
func (r GoldLineageRow) Row() pq.Row {
	var to, outbox any
	if r.ToWorkareaID != "" {
		to = r.ToWorkareaID
	}
	if r.OutboxSeq != 0 {
		outbox = r.OutboxSeq
	}
	return pq.Row{
		LineageTenantID:         r.TenantID,
		LineageArtifactID:       r.ArtifactID,
		LineageVersion:          r.Version,
		LineageJournalSeq:       r.JournalSeq,
		LineageEventType:        r.EventType,
		LineageEventHash:        r.EventHash,
		LineageRecordedAt:       r.RecordedAt,
		LineageActor:            r.Actor,
		LineageReason:           r.Reason,
		LineageStateBefore:      r.StateBefore,
		LineageStateAfter:       r.StateAfter,
		LineageWorkareaID:       r.WorkareaID,
		LineageToWorkareaID:     to,
		LineageWriter:           r.Writer,
		LineagePrincipal:        r.Principal,
		LineageProvenance:       r.Provenance,
		LineagePlaintextDigest:  r.PlaintextDigest,
		LineageCiphertextDigest: r.CiphertextDigest,
		LineageSubmittedSeq:     r.SubmittedSeq,
		LineagePrevJournalSeq:   r.PrevJournalSeq,
		LineageOutboxSeq:        outbox,
	}
}

func (r *GoldLineageRow) set(c GoldLineageCol, v any) {
	switch c {
	case LineageTenantID:
		r.TenantID = asString(v)
	case LineageArtifactID:
		r.ArtifactID = asString(v)
	case LineageVersion:
		r.Version = asInt32(v)
	case LineageJournalSeq:
		r.JournalSeq = asInt64(v)
	case LineageEventType:
		r.EventType = asString(v)
	case LineageEventHash:
		r.EventHash = asBytes(v)
	case LineageRecordedAt:
		r.RecordedAt = asTime(v)
	case LineageActor:
		r.Actor = asString(v)
	case LineageReason:
		r.Reason = asString(v)
	case LineageStateBefore:
		r.StateBefore = asString(v)
	case LineageStateAfter:
		r.StateAfter = asString(v)
	case LineageWorkareaID:
		r.WorkareaID = asString(v)
	case LineageToWorkareaID:
		r.ToWorkareaID = asString(v)
	case LineageWriter:
		r.Writer = asString(v)
	case LineagePrincipal:
		r.Principal = asString(v)
	case LineageProvenance:
		r.Provenance = asString(v)
	case LineagePlaintextDigest:
		r.PlaintextDigest = asString(v)
	case LineageCiphertextDigest:
		r.CiphertextDigest = asString(v)
	case LineageSubmittedSeq:
		r.SubmittedSeq = asInt64(v)
	case LineagePrevJournalSeq:
		r.PrevJournalSeq = asInt64(v)
	case LineageOutboxSeq:
		r.OutboxSeq = asInt64(v)
	}
}

// GoldWorkareaCol is a column of gold.workareas.
type GoldWorkareaCol int

// The columns of gold.workareas, in schema order.
const (
	WorkareaTenantID GoldWorkareaCol = iota
	WorkareaID
	WorkareaClaims
	WorkareaPromoted
	WorkareaDemoted
	WorkareaReassigned
	WorkareaSimulationEnded
	WorkareaErased
	WorkareaWriters
	WorkareaChanges
	WorkareaFirstJournalSeq
	WorkareaFirstChangedAt
	WorkareaLastJournalSeq
	WorkareaLastChangedAt
	WorkareaLastOutboxSeq
	workareaColumns
)

// GoldWorkareaRow is one row of gold.workareas: one workarea of a tenant,
// as the changes to its promoted claims (its gold.lineage rows) add up.
// Claims counts the claims ever promoted in it; each is counted once more
// in the column of its current state (Promoted + Demoted + Reassigned +
// SimulationEnded + Erased = Claims). A reassigned claim stays counted in
// the workarea it was reassigned from (its lineage row's workarea_id).
// Writers are the distinct writers of those claims, sorted. First and last
// are the changes with the smallest and largest journal seq. Never a body
// or a digest: counts and attribution only.
type GoldWorkareaRow struct {
	TenantID        string
	WorkareaID      string
	Claims          int64
	Promoted        int64
	Demoted         int64
	Reassigned      int64
	SimulationEnded int64
	Erased          int64
	Writers         []string // sorted, distinct
	Changes         int64    // the changes (gold.lineage rows) counted
	FirstJournalSeq int64
	FirstChangedAt  time.Time
	LastJournalSeq  int64
	LastChangedAt   time.Time
	LastOutboxSeq   int64 // the largest outbox seq applied; 0: null (every change re-derived after prune)
}

// WorkareaChange is one change to a promoted claim as its workarea's row
// counts it: the claim's state before and after (before is held for its
// promotion), its writer, and the journal event and outbox row (0: a row
// re-derived after prune) that carried it.
type WorkareaChange struct {
	StateBefore, StateAfter string
	Writer                  string
	JournalSeq              int64
	RecordedAt              time.Time
	OutboxSeq               int64
}

// Apply adds one change to the row. It is commutative (counts add, the
// writer set unites, first and last are the smallest and largest journal
// seq), so the row is the same whatever order, or batches, its changes
// arrive in: the lake writer's MERGE, reconcile and repair all build a
// row with it.
func (r *GoldWorkareaRow) Apply(c WorkareaChange) {
	if c.StateBefore == journal.StateHeld {
		r.Claims++
	} else if p := r.count(c.StateBefore); p != nil {
		*p--
	}
	if p := r.count(c.StateAfter); p != nil {
		*p++
	}
	r.Changes++
	if i := sort.SearchStrings(r.Writers, c.Writer); i == len(r.Writers) || r.Writers[i] != c.Writer {
		r.Writers = append(r.Writers, "")
		copy(r.Writers[i+1:], r.Writers[i:])
		r.Writers[i] = c.Writer
	}
	if r.Changes == 1 || c.JournalSeq < r.FirstJournalSeq {
		r.FirstJournalSeq, r.FirstChangedAt = c.JournalSeq, c.RecordedAt
	}
	if r.Changes == 1 || c.JournalSeq > r.LastJournalSeq {
		r.LastJournalSeq, r.LastChangedAt = c.JournalSeq, c.RecordedAt
	}
	r.LastOutboxSeq = max(r.LastOutboxSeq, c.OutboxSeq)
}

func (r *GoldWorkareaRow) count(state string) *int64 {
	switch state {
	case journal.StatePromoted:
		return &r.Promoted
	case journal.StateDemoted:
		return &r.Demoted
	case journal.StateReassigned:
		return &r.Reassigned
	case journal.StateSimulationEnded:
		return &r.SimulationEnded
	case journal.StateErased:
		return &r.Erased
	}
	return nil
}

// Row is the row as written to Parquet, in schema order.
func (r GoldWorkareaRow) Row() pq.Row {
	var outbox, writers any
	if r.LastOutboxSeq != 0 {
		outbox = r.LastOutboxSeq
	}
	if len(r.Writers) > 0 {
		writers = append([]string(nil), r.Writers...)
	}
	return pq.Row{
		WorkareaTenantID:        r.TenantID,
		WorkareaID:              r.WorkareaID,
		WorkareaClaims:          r.Claims,
		WorkareaPromoted:        r.Promoted,
		WorkareaDemoted:         r.Demoted,
		WorkareaReassigned:      r.Reassigned,
		WorkareaSimulationEnded: r.SimulationEnded,
		WorkareaErased:          r.Erased,
		WorkareaWriters:         writers,
		WorkareaChanges:         r.Changes,
		WorkareaFirstJournalSeq: r.FirstJournalSeq,
		WorkareaFirstChangedAt:  r.FirstChangedAt,
		WorkareaLastJournalSeq:  r.LastJournalSeq,
		WorkareaLastChangedAt:   r.LastChangedAt,
		WorkareaLastOutboxSeq:   outbox,
	}
}

func (r *GoldWorkareaRow) set(c GoldWorkareaCol, v any) {
	switch c {
	case WorkareaTenantID:
		r.TenantID = asString(v)
	case WorkareaID:
		r.WorkareaID = asString(v)
	case WorkareaClaims:
		r.Claims = asInt64(v)
	case WorkareaPromoted:
		r.Promoted = asInt64(v)
	case WorkareaDemoted:
		r.Demoted = asInt64(v)
	case WorkareaReassigned:
		r.Reassigned = asInt64(v)
	case WorkareaSimulationEnded:
		r.SimulationEnded = asInt64(v)
	case WorkareaErased:
		r.Erased = asInt64(v)
	case WorkareaWriters:
		r.Writers = asStrings(v)
	case WorkareaChanges:
		r.Changes = asInt64(v)
	case WorkareaFirstJournalSeq:
		r.FirstJournalSeq = asInt64(v)
	case WorkareaFirstChangedAt:
		r.FirstChangedAt = asTime(v)
	case WorkareaLastJournalSeq:
		r.LastJournalSeq = asInt64(v)
	case WorkareaLastChangedAt:
		r.LastChangedAt = asTime(v)
	case WorkareaLastOutboxSeq:
		r.LastOutboxSeq = asInt64(v)
	}
}

// WorkareaOf reads the workarea a full gold.workareas row is of: the
// table's key (the lake writer's MERGE matches and sorts rows by it).
func WorkareaOf(row pq.Row) string { return asString(row[WorkareaID]) }

// Projection reads the rows of a scan of some columns of a table: Columns
// are the names to scan (delta.ScanOptions.Columns), in the projection's
// order, and Decode fills those fields of a typed row from a scanned row
// (the others stay zero).
type Projection[C ~int, R any] struct {
	cols  []C
	names []string
	set   func(*R, C, any)
}

// Columns are the names to scan, in the projection's order.
func (p Projection[C, R]) Columns() []string { return p.names }

// Decode reads one scanned row (its values in Columns' order). A value of
// another type than the column's, or null, leaves the field zero (a null
// body leaves SilverRow.Body nil).
func (p Projection[C, R]) Decode(row pq.Row) R {
	var r R
	for i, c := range p.cols {
		if i < len(row) {
			p.set(&r, c, row[i])
		}
	}
	return r
}

func project[C interface {
	~int
	Name() string
}, R any](cols []C, all C, set func(*R, C, any)) Projection[C, R] {
	if len(cols) == 0 {
		for c := C(0); c < all; c++ {
			cols = append(cols, c)
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name()
	}
	return Projection[C, R]{cols: cols, names: names, set: set}
}

// BronzeColumns is a projection of bronze.events (no columns: all of
// them, in schema order).
func BronzeColumns(cols ...BronzeCol) Projection[BronzeCol, BronzeRow] {
	return project(cols, bronzeColumns, (*BronzeRow).set)
}

// SilverColumns is a projection of silver.claims (no columns: all).
func SilverColumns(cols ...SilverCol) Projection[SilverCol, SilverRow] {
	return project(cols, silverColumns, (*SilverRow).set)
}

// LineageColumns is a projection of gold.lineage (no columns: all).
func LineageColumns(cols ...GoldLineageCol) Projection[GoldLineageCol, GoldLineageRow] {
	return project(cols, lineageColumns, (*GoldLineageRow).set)
}

// WorkareaColumns is a projection of gold.workareas (no columns: all).
func WorkareaColumns(cols ...GoldWorkareaCol) Projection[GoldWorkareaCol, GoldWorkareaRow] {
	return project(cols, workareaColumns, (*GoldWorkareaRow).set)
}

var (
	allBronze   = BronzeColumns()
	allSilver   = SilverColumns()
	allLineage  = LineageColumns()
	allWorkarea = WorkareaColumns()
)

// DecodeBronze reads a full bronze.events row (schema order).
func DecodeBronze(row pq.Row) BronzeRow { return allBronze.Decode(row) }

// DecodeSilver reads a full silver.claims row (schema order).
func DecodeSilver(row pq.Row) SilverRow { return allSilver.Decode(row) }

// DecodeLineage reads a full gold.lineage row (schema order).
func DecodeLineage(row pq.Row) GoldLineageRow { return allLineage.Decode(row) }

// DecodeWorkarea reads a full gold.workareas row (schema order).
func DecodeWorkarea(row pq.Row) GoldWorkareaRow { return allWorkarea.Decode(row) }

// The conversions are lenient the way every reader was before this
// package: a value of another type (or null) reads as the zero value;
// integers read across widths, strings and binary across each other.

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func asBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}

// asStrings reads a list of strings (a Parquet list reads as []any).
func asStrings(v any) []string {
	switch x := v.(type) {
	case []string:
		return append([]string(nil), x...)
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, asString(e))
		}
		return out
	}
	return nil
}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	}
	return 0
}

func asInt32(v any) int32 {
	switch x := v.(type) {
	case int32:
		return x
	case int64:
		return int32(x)
	}
	return 0
}

func asTime(v any) time.Time {
	t, _ := v.(time.Time)
	return t
}

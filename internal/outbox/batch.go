package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The batch read: the one scan the lake writer applies rows from. Every
// row comes with what the lake writer needs to check and build it in the
// same round trip — the journal event it cites (bronze needs every field,
// silver the event time), the held body of a silver materialize, and
// whether the row is already dead-lettered — so a batch is one ordered
// scan, whatever its size. ReadImplied returns the same shape for rows the
// journal implies but prune has deleted (the lake writer's rebuild of a
// table re-derives them).

// RowsQuerier runs a query returning rows (a pool, a connection or a
// transaction).
type RowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// BatchRow is one outbox row of a batch, with its journal event and held
// body.
type BatchRow struct {
	Seq        int64 // 0: a re-derived row (ReadImplied), which has no outbox seq
	Tenant     uuid.UUID
	JournalSeq int64
	Target     string // as stored: bronze.events | silver.claims | gold.lineage | gold.workareas, unless it is unknown
	Op         string
	ArtifactID string // empty when NULL
	Version    int32  // 0 when NULL
	Payload    string
	// Event is the journal event (Tenant, JournalSeq) the row cites; nil
	// when there is no such event.
	Event *Event
	// Body is the held ciphertext (oml.claim_bodies) of a silver
	// materialize; nil when none is held.
	Body []byte
	// Dead: the row is dead-lettered (never for a re-derived row).
	Dead bool
}

// Event is a journal event as the batch read returns it.
type Event struct {
	Type       string
	RecordedAt time.Time // in UTC
	PrevHash   []byte
	Hash       []byte
	Signature  []byte
	KeyID      string
	Payload    []byte
}

// Scope narrows ReadBatch to one table's rows (tenant, target).
type Scope struct {
	Tenant uuid.UUID
	Target string
	// Only, when set, narrows the read further to some keys of the table.
	Only *Keys
}

// Keys selects rows of one table: by journal seq (bronze, gold: one row
// per event) or, ByClaim, by claim (silver: ArtifactIDs[i] at
// Versions[i]). An empty selection selects nothing.
type Keys struct {
	ByClaim     bool
	JournalSeqs []int64
	ArtifactIDs []string
	Versions    []int32
}

// batchColumns are the columns every batch read returns, in scanBatchRow's
// order.
const batchColumns = `o.seq, o.tenant_id, o.journal_seq, o.target, o.op, o.artifact_id, o.version, o.payload::text,
       j.seq IS NOT NULL, j.event_type, j.recorded_at, j.prev_hash, j.hash, j.signature, j.key_id, j.payload,
       b.ciphertext, d.outbox_seq IS NOT NULL`

// batchQuery is the drain's read: (from, to], optionally one table's.
const batchQuery = `
SELECT ` + batchColumns + `
FROM oml.outbox o
LEFT JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
LEFT JOIN oml.claim_bodies b ON o.target = 'silver.claims' AND o.op = 'materialize' AND b.tenant_id = o.tenant_id
                            AND b.artifact_id = o.artifact_id AND b.version = o.version
LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
WHERE o.seq > $1 AND o.seq <= $2
  AND ($3::uuid IS NULL OR (o.tenant_id = $3 AND o.target = $4))
ORDER BY o.seq`

// keysQuery is batchQuery for one table's rows, narrowed (when $5 / $6,$7
// are not null) to the given journal seqs or claims. It is a statement of
// its own so the drain's hot read keeps its plan.
const keysQuery = `
SELECT ` + batchColumns + `
FROM oml.outbox o
LEFT JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
LEFT JOIN oml.claim_bodies b ON o.op = 'materialize' AND b.tenant_id = o.tenant_id
                            AND b.artifact_id = o.artifact_id AND b.version = o.version
LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
WHERE o.seq > $1 AND o.seq <= $2 AND o.tenant_id = $3 AND o.target = $4
  AND ($5::bigint[] IS NULL OR o.journal_seq = ANY($5))
  AND ($6::text[] IS NULL OR (o.artifact_id, o.version) IN (SELECT * FROM unnest($6::text[], $7::int[])))
ORDER BY o.seq`

// ReadBatch streams the outbox rows with from < seq ≤ to (of scope's table
// only, when scope is set) in seq order, dead-lettered ones included (Dead
// set), calling fn for each; fn may stop the read by returning an error,
// which ReadBatch returns. The caller says what it was reading in its own
// error: a failed query or read comes back unwrapped (a row that does not
// decode as "decode outbox row: …").
func ReadBatch(ctx context.Context, q RowsQuerier, from, to int64, scope *Scope, fn func(*BatchRow) error) error {
	var rows pgx.Rows
	var err error
	switch {
	case scope == nil:
		rows, err = q.Query(ctx, batchQuery, from, to, nil, nil)
	case scope.Only == nil:
		rows, err = q.Query(ctx, batchQuery, from, to, scope.Tenant, scope.Target)
	default:
		// A nil array is NULL (no filter), an empty one selects nothing.
		var seqs []int64
		var arts []string
		var vers []int32
		if k := scope.Only; k.ByClaim {
			arts, vers = append([]string{}, k.ArtifactIDs...), append([]int32{}, k.Versions...)
		} else {
			seqs = append([]int64{}, k.JournalSeqs...)
		}
		rows, err = q.Query(ctx, keysQuery, from, to, scope.Tenant, scope.Target, seqs, arts, vers)
	}
	if err != nil {
		return err
	}
	return scanBatch(rows, fn)
}

// Implied is a row the journal implies for a table that the outbox no
// longer holds (journal.DeriveOutbox's row, less its table).
type Implied struct {
	JournalSeq int64
	Op         string
	ArtifactID string // "" for none
	Version    int32  // 0 for none
	Payload    string
}

// impliedQuery has the batch read's columns for rows given as arrays, with
// seq 0 and never dead-lettered.
const impliedQuery = `
SELECT 0::bigint, $1::uuid, u.j, $2::text, u.o, u.a, u.v, u.p,
       j.seq IS NOT NULL, j.event_type, j.recorded_at, j.prev_hash, j.hash, j.signature, j.key_id, j.payload,
       b.ciphertext, false
FROM unnest($3::bigint[], $4::text[], $5::text[], $6::int[], $7::text[]) WITH ORDINALITY AS u(j, o, a, v, p, ord)
LEFT JOIN oml.journal j ON j.tenant_id = $1 AND j.seq = u.j
LEFT JOIN oml.claim_bodies b ON $2::text = 'silver.claims' AND u.o = 'materialize' AND b.tenant_id = $1 AND b.artifact_id = u.a AND b.version = u.v
ORDER BY u.ord`

// ReadImplied reads, for the rows of table (tenant, target) that prune
// deleted and the journal implies, what ReadBatch reads for an outbox row
// (Seq 0, never Dead), in the order given, calling fn for each. Errors
// come back as ReadBatch's do.
func ReadImplied(ctx context.Context, q RowsQuerier, tenant uuid.UUID, target string, implied []Implied, fn func(*BatchRow) error) error {
	jseqs := make([]int64, len(implied))
	ops := make([]string, len(implied))
	arts := make([]*string, len(implied))
	vers := make([]*int32, len(implied))
	payloads := make([]string, len(implied))
	for i := range implied {
		r := &implied[i]
		jseqs[i], ops[i], payloads[i] = r.JournalSeq, r.Op, r.Payload
		if r.ArtifactID != "" {
			arts[i] = &r.ArtifactID
		}
		if r.Version != 0 {
			vers[i] = &r.Version
		}
	}
	rows, err := q.Query(ctx, impliedQuery, tenant, target, jseqs, ops, arts, vers, payloads)
	if err != nil {
		return err
	}
	return scanBatch(rows, fn)
}

// scanBatch decodes the rows of a batch read, one fresh BatchRow each (fn
// may keep it). The scan's targets are one batchScan for the whole read
// (a fresh variable per column and row, each passed to Scan, was an
// allocation each); what a row keeps is its BatchRow and Event (one
// allocation), its strings, one buffer for its event's prev_hash, hash and
// signature, its event payload and its held body.
func scanBatch(rows pgx.Rows, fn func(*BatchRow) error) error {
	defer rows.Close()
	s := batchScan{}
	s.target.seen, s.target.notNull = map[string]string{}, true
	s.op = internedText{seen: s.target.seen, notNull: true}
	s.eventType = internedText{seen: s.target.seen}
	s.keyID = internedText{seen: s.target.seen}
	dest := []any{&s.seq, &s.tenant, &s.journalSeq, &s.target, &s.op, &s.artifact, &s.version, &s.payload,
		&s.hasEvent, &s.eventType, &s.recordedAt, &s.prevHash, &s.hash, &s.sig, &s.keyID, &s.evPayload, &s.body, &s.dead}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("decode outbox row: %w", err)
		}
		a := &batchRowEvent{}
		r := &a.row
		*r = BatchRow{Seq: s.seq, Tenant: uuid.UUID(s.tenant.Bytes), JournalSeq: s.journalSeq, Target: s.target.s, Op: s.op.s,
			ArtifactID: s.artifact.String, Version: s.version.Int32, Payload: s.payload, Body: s.body, Dead: s.dead}
		if s.hasEvent {
			a.event = Event{Type: s.eventType.s, RecordedAt: s.recordedAt.Time.UTC(), KeyID: s.keyID.s, Payload: s.evPayload}
			carve(&a.event.PrevHash, &a.event.Hash, &a.event.Signature, s.prevHash, s.hash, s.sig)
			r.Event = &a.event
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return nil
}

// batchScan holds the scan targets of one batch read (scanBatch).
type batchScan struct {
	seq, journalSeq              int64
	tenant                       pgtype.UUID
	target, op, eventType, keyID internedText
	artifact                     pgtype.Text
	version                      pgtype.Int4
	payload                      string
	hasEvent, dead               bool
	recordedAt                   pgtype.Timestamptz
	prevHash, hash, sig          viewBytes
	evPayload, body              []byte
}

// batchRowEvent is a BatchRow and its Event in one allocation.
type batchRowEvent struct {
	row   BatchRow
	event Event
}

// internedText scans a text column whose values repeat (a target, an op,
// an event type, a key id) into one string per distinct value of the read
// (the first internCap of them; the rest each get their own). notNull: a
// NULL is an error, as scanning it into a string was.
type internedText struct {
	s       string
	seen    map[string]string // shared by the columns of one read
	notNull bool
}

const internCap = 256

func (t *internedText) ScanBytes(b []byte) error {
	if b == nil && t.notNull {
		return fmt.Errorf("cannot scan NULL into a string")
	}
	if s, ok := t.seen[string(b)]; ok {
		t.s = s
		return nil
	}
	t.s = string(b)
	if len(t.seen) < internCap {
		t.seen[t.s] = t.s
	}
	return nil
}

// viewBytes is a bytea column as the driver holds it: valid until the
// next row (carve copies it out); nil for NULL.
type viewBytes []byte

func (v *viewBytes) ScanBytes(b []byte) error {
	*v = b
	return nil
}

// carve copies a, b and c into one new buffer and points *da, *db and *dc
// at their parts, each with its own capacity; a NULL (nil) stays nil and
// an empty value stays empty, not nil, as a scan into a []byte leaves
// them.
func carve(da, db, dc *[]byte, a, b, c viewBytes) {
	buf := make([]byte, len(a)+len(b)+len(c))
	off := 0
	for _, p := range [3]struct {
		dst *[]byte
		src viewBytes
	}{{da, a}, {db, b}, {dc, c}} {
		if p.src == nil {
			*p.dst = nil
			continue
		}
		end := off + copy(buf[off:], p.src)
		*p.dst = buf[off:end:end]
		off = end
	}
}

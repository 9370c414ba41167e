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
// may keep it).
func scanBatch(rows pgx.Rows, fn func(*BatchRow) error) error {
	defer rows.Close()
	for rows.Next() {
		var (
			r                              BatchRow
			tenant                         pgtype.UUID
			artifact                       pgtype.Text
			version                        pgtype.Int4
			hasEvent                       bool
			eventType, keyID               pgtype.Text
			recordedAt                     pgtype.Timestamptz
			prevHash, hash, sig, evPayload []byte
		)
		if err := rows.Scan(&r.Seq, &tenant, &r.JournalSeq, &r.Target, &r.Op, &artifact, &version, &r.Payload,
			&hasEvent, &eventType, &recordedAt, &prevHash, &hash, &sig, &keyID, &evPayload, &r.Body, &r.Dead); err != nil {
			return fmt.Errorf("decode outbox row: %w", err)
		}
		r.Tenant = uuid.UUID(tenant.Bytes)
		r.ArtifactID, r.Version = artifact.String, version.Int32
		if hasEvent {
			r.Event = &Event{Type: eventType.String, RecordedAt: recordedAt.Time.UTC(), PrevHash: prevHash, Hash: hash,
				Signature: sig, KeyID: keyID.String, Payload: evPayload}
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return nil
}

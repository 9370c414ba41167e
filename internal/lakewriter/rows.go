package lakewriter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// item is one outbox row of a batch, decoded for its table. Exactly one of
// row (an insert), retract or poison is set.
type item struct {
	seq        int64
	journalSeq int64
	table      tables.TableKey
	target     string // as stored (the table kind, unless it is unknown)
	op         string
	artifact   string
	version    int32

	row     pq.Row   // bronze/gold/silver materialize: the table row
	retract *retract // silver retract (a gold.workareas row has neither: its change is lin)
	poison  error    // why this row cannot be applied (its own fault)
	size    int      // approximate bytes, for logs/metrics

	// For the row check (check.go): the cited journal event and the
	// decoded payload, and ghost: the row's tenant was never created, so
	// its dead letter goes on the provider chain.
	ev     *event
	bronze *journal.BronzePayload
	mat    *journal.MaterializePayload
	ret    *journal.RetractPayload
	lin    *journal.LineagePayload
	ghost  bool
	// derived: re-derived from the journal because prune deleted the
	// outbox row (rederive.go); seq is 0 and the lake row's outbox_seq NULL.
	derived bool
}

type retract struct {
	state     string
	updatedAt time.Time
}

// PoisonError is a row that fails for a reason of its own, not an outage.
type PoisonError struct {
	Seq    int64
	Reason string
}

func (e *PoisonError) Error() string { return fmt.Sprintf("outbox row %d: %s", e.Seq, e.Reason) }

func poisonf(seq int64, format string, args ...any) error {
	return &PoisonError{Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

// The whole batch in one ordered scan: the outbox row, its journal event
// (bronze needs every field, silver the event time), the held body of a
// materialize, and whether the row is already dead-lettered.
const batchQuery = `
SELECT o.seq, o.tenant_id, o.journal_seq, o.target, o.op, o.artifact_id, o.version, o.payload::text,
       j.seq IS NOT NULL, j.event_type, j.recorded_at, j.prev_hash, j.hash, j.signature, j.key_id, j.payload,
       b.ciphertext, d.outbox_seq IS NOT NULL
FROM oml.outbox o
LEFT JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
LEFT JOIN oml.claim_bodies b ON o.target = 'silver.claims' AND o.op = 'materialize' AND b.tenant_id = o.tenant_id
                            AND b.artifact_id = o.artifact_id AND b.version = o.version
LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
WHERE o.seq > $1 AND o.seq <= $2
  AND ($3::uuid IS NULL OR (o.tenant_id = $3 AND o.target = $4))
ORDER BY o.seq`

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// loadBatch reads (from, to] and decodes every row for its table. Rows that
// are already dead-lettered are left out; that decision is recorded in
// PostgreSQL, so a retried batch leaves out the same rows.
//
// scope, when set, limits the read to one table's rows (a tenant's catch-up).
// Every row goes through the row check (check.go) before it is returned.
func loadBatch(ctx context.Context, q querier, chk *rowChecker, from, to int64, scope *tables.TableKey) ([]*item, error) {
	var tenant, target any
	if scope != nil {
		tenant, target = scope.Tenant, string(scope.Kind)
		if db, ok := q.(txBeginner); ok && from == 0 {
			// A table rebuilt from nothing: its pruned rows come from the
			// journal (rederive.go).
			return loadRebuild(ctx, db, chk, to, *scope)
		}
		if from > 0 {
			// A table caught up from its txn version must not be below
			// its prune mark (through.go).
			if err := belowPruneMark(ctx, q, *scope, from); err != nil {
				return nil, err
			}
		}
	}
	rows, err := q.Query(ctx, batchQuery, from, to, tenant, target)
	if err != nil {
		return nil, fmt.Errorf("read outbox rows (%d, %d]: %w", from, to, err)
	}
	defer rows.Close()
	items, err := scanItems(rows, from, to)
	if err != nil {
		return nil, err
	}
	if err := chk.check(ctx, q, items); err != nil {
		return nil, err
	}
	return items, nil
}

// scanItems decodes the rows of batchQuery (or derivedQuery, which has the
// same columns) for their tables.
func scanItems(rows pgx.Rows, from, to int64) ([]*item, error) {
	defer rows.Close()
	var items []*item
	for rows.Next() {
		var (
			seq, journalSeq                int64
			tenant                         pgtype.UUID
			target, op, payload            string
			artifact                       pgtype.Text
			version                        pgtype.Int4
			hasEvent, dead                 bool
			eventType, keyID               pgtype.Text
			recordedAt                     pgtype.Timestamptz
			prevHash, hash, sig, evPayload []byte
			body                           []byte
		)
		if err := rows.Scan(&seq, &tenant, &journalSeq, &target, &op, &artifact, &version, &payload,
			&hasEvent, &eventType, &recordedAt, &prevHash, &hash, &sig, &keyID, &evPayload, &body, &dead); err != nil {
			return nil, fmt.Errorf("decode outbox row: %w", err)
		}
		if dead {
			continue
		}
		it := &item{seq: seq, journalSeq: journalSeq, target: target, op: op, artifact: artifact.String, version: version.Int32,
			size: len(payload) + len(evPayload) + len(body) + 128}
		tid := uuid.UUID(tenant.Bytes)
		kind, kerr := tables.ParseTarget(target)
		it.table = tables.TableKey{Tenant: tid, Kind: kind}
		switch {
		case kerr != nil:
			it.poison = poisonf(seq, "%v", kerr)
		case !hasEvent:
			it.poison = poisonf(seq, "journal event %s/%d that the row refers to does not exist", tid, journalSeq)
		default:
			ev := &event{tenant: tid, seq: journalSeq, eventType: eventType.String, recordedAt: recordedAt.Time.UTC(),
				prevHash: prevHash, hash: hash, sig: sig, keyID: keyID.String, payload: evPayload}
			it.ev = ev
			it.poison = decodeItem(it, kind, payload, *ev, body)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox rows (%d, %d]: %w", from, to, err)
	}
	rows.Close()
	return items, nil
}

type event struct {
	tenant     uuid.UUID
	seq        int64
	eventType  string
	recordedAt time.Time
	prevHash   []byte
	hash       []byte
	sig        []byte
	keyID      string
	payload    []byte
}

func decodeItem(it *item, kind tables.Kind, payload string, ev event, body []byte) error {
	seq := it.seq
	switch kind {
	case tables.Bronze:
		if it.op != journal.OpAppend {
			return poisonf(seq, "bronze.events rows must be appends, not %q", it.op)
		}
		if f := invalidUTF8(ev); f != "" {
			return poisonf(seq, "journal event %s/%d has a %s that is not valid UTF-8 (a forged journal row; run oml chain verify): it is not written to the lake", ev.tenant, ev.seq, f)
		}
		var p journal.BronzePayload
		if err := strictJSON(payload, &p); err != nil {
			return poisonf(seq, "undecodable bronze.events payload: %v", err)
		}
		it.bronze = &p
		it.row = tables.BronzeRow{TenantID: ev.tenant.String(), Seq: ev.seq, EventType: ev.eventType, RecordedAt: ev.recordedAt,
			PrevHash: ev.prevHash, Hash: ev.hash, Signature: ev.sig, KeyID: ev.keyID, Payload: string(ev.payload), OutboxSeq: seq}.Row()
		return nil

	case tables.Gold:
		return decodeLineage(it, payload, ev)
	case tables.Workareas:
		return decodeWorkarea(it, payload)
	}

	// silver.claims
	if it.artifact == "" || it.version <= 0 {
		return poisonf(seq, "silver.claims row without an artifact id and version")
	}
	switch it.op {
	case journal.OpMaterialize:
		var p journal.MaterializePayload
		if err := strictJSON(payload, &p); err != nil {
			return poisonf(seq, "undecodable materialize payload: %v", err)
		}
		if p.CiphertextDigest == "" || p.PlaintextDigest == "" {
			return poisonf(seq, "materialize payload lacks the journalled digests")
		}
		if body == nil {
			return poisonf(seq, "the held body of %s v%d is missing from oml.claim_bodies", it.artifact, it.version)
		}
		sum := sha256.Sum256(body)
		want, err := hex.DecodeString(p.CiphertextDigest)
		if err != nil || !bytes.Equal(sum[:], want) {
			return poisonf(seq, "ciphertext digest mismatch for %s v%d: the held body hashes to %x, the journal says %s",
				it.artifact, it.version, sum, p.CiphertextDigest)
		}
		it.mat = &p
		state := p.State
		if state == "" {
			state = journal.StatePromoted
		}
		it.row = tables.SilverRow{ArtifactID: it.artifact, Version: it.version, TenantID: ev.tenant.String(),
			WorkareaID: p.WorkareaID, Writer: p.Writer, Principal: p.Principal, Provenance: p.Provenance,
			PlaintextDigest: p.PlaintextDigest, CiphertextDigest: p.CiphertextDigest, Body: body, State: state,
			PromotedBy: p.PromotedBy, SubmittedSeq: p.SubmittedSeq, PromotedSeq: p.PromotedSeq,
			JournalSeq: ev.seq, OutboxSeq: seq, UpdatedAt: ev.recordedAt}.Row()
		return nil
	case journal.OpRetract:
		var p journal.RetractPayload
		if err := strictJSON(payload, &p); err != nil {
			return poisonf(seq, "undecodable retract payload: %v", err)
		}
		switch p.State {
		case journal.StateDemoted, journal.StateErased, journal.StateSimulationEnded, journal.StateReassigned:
		default:
			return poisonf(seq, "retract to unknown state %q", p.State)
		}
		it.ret = &p
		it.retract = &retract{state: p.State, updatedAt: ev.recordedAt}
		return nil
	}
	return poisonf(seq, "silver.claims rows must be materialize or retract, not %q", it.op)
}

func strictJSON(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

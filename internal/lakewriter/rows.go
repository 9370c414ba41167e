package lakewriter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
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
	// recordedAt is the cited event's time, kept for a gold.workareas
	// change when shed drops ev.
	recordedAt time.Time
}

// shed drops what only the row check needed once it has run: the cited
// event (its payload is a second copy of a bronze row's, and the only
// copy of the others', which the lake rows do not hold) and the decoded
// payloads, except a gold.workareas row's (its commit folds the change
// into its workarea's row). A checked batch waits in memory for its
// commits while the next one is read (prefetch.go), so this is about
// half of what the two batches in flight hold (docs/lake-writer.md,
// memory).
func (it *item) shed() {
	if it.ev != nil {
		it.recordedAt = it.ev.recordedAt
	}
	it.ev, it.bronze, it.mat, it.ret = nil, nil, nil, nil
	if it.table.Kind != tables.Workareas {
		it.lin = nil
	}
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
	if scope != nil {
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
	var items []*item
	if err := outbox.ReadBatch(ctx, q, from, to, outboxScope(scope), collectItems(&items)); err != nil {
		return nil, fmt.Errorf("read outbox rows (%d, %d]: %w", from, to, err)
	}
	if err := chk.check(ctx, q, items); err != nil {
		return nil, err
	}
	return items, nil
}

// outboxScope is the batch read's scope of one table (nil: every table).
func outboxScope(key *tables.TableKey) *outbox.Scope {
	if key == nil {
		return nil
	}
	return &outbox.Scope{Tenant: key.Tenant, Target: string(key.Kind)}
}

// collectItems decodes the rows of a batch read (outbox.ReadBatch,
// outbox.ReadImplied) for their tables into *items, leaving out the
// dead-lettered ones.
func collectItems(items *[]*item) func(*outbox.BatchRow) error {
	return func(r *outbox.BatchRow) error {
		if r.Dead {
			return nil
		}
		it := &item{seq: r.Seq, journalSeq: r.JournalSeq, target: r.Target, op: r.Op, artifact: r.ArtifactID, version: r.Version}
		kind, kerr := tables.ParseTarget(r.Target)
		it.table = tables.TableKey{Tenant: r.Tenant, Kind: kind}
		switch {
		case kerr != nil:
			it.poison = poisonf(r.Seq, "%v", kerr)
		case r.Event == nil:
			it.poison = poisonf(r.Seq, "journal event %s/%d that the row refers to does not exist", r.Tenant, r.JournalSeq)
		default:
			e := r.Event
			ev := &event{tenant: r.Tenant, seq: r.JournalSeq, eventType: e.Type, recordedAt: e.RecordedAt,
				prevHash: e.PrevHash, hash: e.Hash, sig: e.Signature, keyID: e.KeyID, payload: e.Payload}
			it.ev = ev
			it.poison = decodeItem(it, kind, r.Payload, *ev, r.Body)
		}
		*items = append(*items, it)
		return nil
	}
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

package lakewriter

import (
	"bytes"
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/tables"
)

// gold.lineage rows: one per change to a promoted claim (journal fold,
// retire and promotion), appended like bronze. The row is built from the
// outbox payload (attribution, digests, states: what the fold saw) and the
// journal event it cites (seq, type, hash, time), and is checked against
// the journal before it is written (checkLineage).

func decodeLineage(it *item, payload string, ev event) error {
	seq := it.seq
	if it.op != journal.OpMaterialize && it.op != journal.OpRetract {
		return poisonf(seq, "gold.lineage rows must be materialize (a promotion) or retract (a later change), not %q", it.op)
	}
	if it.artifact == "" || it.version <= 0 {
		return poisonf(seq, "gold.lineage row without an artifact id and version")
	}
	var p journal.LineagePayload
	if err := strictJSON(payload, &p); err != nil {
		return poisonf(seq, "undecodable gold.lineage payload: %v", err)
	}
	it.lin = &p
	it.row = tables.GoldLineageRow{TenantID: ev.tenant.String(), ArtifactID: it.artifact, Version: it.version,
		JournalSeq: ev.seq, EventType: ev.eventType, EventHash: ev.hash, RecordedAt: ev.recordedAt,
		Actor: p.Actor, Reason: p.Reason, StateBefore: p.StateBefore, StateAfter: p.StateAfter,
		WorkareaID: p.WorkareaID, ToWorkareaID: p.ToWorkareaID, Writer: p.Writer, Principal: p.Principal,
		Provenance: p.Provenance, PlaintextDigest: p.PlaintextDigest, CiphertextDigest: p.CiphertextDigest,
		SubmittedSeq: p.SubmittedSeq, PrevJournalSeq: p.PrevSeq, OutboxSeq: seq}.Row()
	return nil
}

// checkLineage checks each lineage row against the three journal events it
// rests on: the cited event (the change, arrived with the batch), the
// claim's submission and the claim's previous change (read for the whole
// batch in one query, hash-checked).
func checkLineage(ctx context.Context, q querier, lins []*item) error {
	if len(lins) == 0 {
		return nil
	}
	var tenants []pgtype.UUID
	var seqs []int64
	for _, it := range lins {
		t := pgtype.UUID{Bytes: it.ev.tenant, Valid: true}
		tenants = append(tenants, t, t)
		seqs = append(seqs, it.lin.SubmittedSeq, it.lin.PrevSeq)
	}
	evs, err := readEvents(ctx, q, tenants, seqs)
	if err != nil {
		return err
	}
	memo := payloadMemo{}
	for _, it := range lins {
		if it.poison == nil {
			it.poison = checkLineageRow(it, evs, memo)
		}
	}
	return nil
}

// payloadMemo remembers, within one batch's lineage check, the journal
// payloads it decoded and the hashes it checked. A change has a
// gold.lineage and a gold.workareas row, and the changes of one claim cite
// the same submission, so most events are asked about several times.
// journal.Decode is a function of the event type and the payload bytes
// alone, and an entry is reused only for the same type and the same bytes.
type payloadMemo map[eventKey]*memoEntry

type memoEntry struct {
	eventType string
	payload   []byte
	decoded   journal.Payload
	err       error
	hashed    *event // the event whose hash was checked, hashErr its result
	hashErr   error
}

func (m payloadMemo) entry(e *event) *memoEntry {
	k := eventKey{e.tenant, e.seq}
	if me := m[k]; me != nil && me.eventType == e.eventType && bytes.Equal(me.payload, e.payload) {
		return me
	}
	me := &memoEntry{eventType: e.eventType, payload: e.payload}
	me.decoded, me.err = journal.Decode(journal.Type(e.eventType), e.payload)
	m[k] = me
	return me
}

// decode is journal.Decode of e's payload.
func (m payloadMemo) decode(e *event) (journal.Payload, error) {
	me := m.entry(e)
	return me.decoded, me.err
}

// checkHash is e.checkHash, once per event read.
func (m payloadMemo) checkHash(e *event) error {
	me := m.entry(e)
	if me.hashed != e {
		me.hashed, me.hashErr = e, e.checkHash()
	}
	return me.hashErr
}

func checkLineageRow(it *item, evs map[eventKey]*event, memo payloadMemo) error {
	tbl := string(it.table.Kind) // gold.lineage or gold.workareas
	decode := func(seq int64, what string) (journal.Payload, error) {
		e := evs[eventKey{it.ev.tenant, seq}]
		if e == nil {
			return nil, poisonf(it.seq, "%s row of %s v%d names journal seq %d as its %s, which does not exist", tbl, it.artifact, it.version, seq, what)
		}
		if err := memo.checkHash(e); err != nil {
			return nil, poisonf(it.seq, "%v", err)
		}
		p, err := memo.decode(e)
		if err != nil {
			return nil, poisonf(it.seq, "%s row of %s v%d: its %s (journal seq %d) does not decode: %v", tbl, it.artifact, it.version, what, seq, err)
		}
		return p, nil
	}
	change, err := memo.decode(it.ev)
	if err != nil {
		return poisonf(it.seq, "%s row of %s v%d: journal event %d does not decode: %v", tbl, it.artifact, it.version, it.ev.seq, err)
	}
	subP, err := decode(it.lin.SubmittedSeq, "submission")
	if err != nil {
		return err
	}
	sub, ok := subP.(journal.ClaimSubmitted)
	if !ok {
		return poisonf(it.seq, "%s row of %s v%d names journal seq %d as its submission, but that is a %s", tbl, it.artifact, it.version, it.lin.SubmittedSeq, subP.EventType())
	}
	prev, err := decode(it.lin.PrevSeq, "previous change")
	if err != nil {
		return err
	}
	want, err := journal.ImpliedLineage(change, it.ev.seq, it.artifact, int(it.version), sub, it.lin.SubmittedSeq, prev, it.lin.PrevSeq)
	if err != nil {
		return poisonf(it.seq, "%s row of %s v%d is not backed by the journal: %v", tbl, it.artifact, it.version, err)
	}
	if (want.StateAfter == journal.StatePromoted) != (it.op == journal.OpMaterialize) {
		return poisonf(it.seq, "%s row of %s v%d is a %s, but journal event %d is a %s", tbl, it.artifact, it.version, it.op, it.ev.seq, it.ev.eventType)
	}
	if want != *it.lin {
		return poisonf(it.seq, "%s payload of %s v%d differs from what the journal implies (journal events %d, %d and %d)",
			tbl, it.artifact, it.version, it.lin.SubmittedSeq, it.lin.PrevSeq, it.ev.seq)
	}
	return nil
}

package reconcile

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// ---- gold.lineage ----
//
// The comparand is the journal itself: the gold rows the tenant's chain
// implies (journal.DeriveOutbox, the fold that emitted them, so also the
// rows `oml outbox prune` deleted), each with its event's type, hash and
// time. The table must hold each implied row with journal seq ≤ J exactly
// once and equal in every column but outbox_seq (drawn at insert, NULL for
// a row re-derived after prune); rows of events in (J, S] may or may not
// be there; a row the chain does not imply, or of an event beyond S, is
// unexpected. An open, re-enqueued-but-pending or abandoned dead letter of
// the row explains its absence.
//
// Memory: unlike bronze and silver, the journal side is a replay of the
// tenant's chain (as journal.CheckFold does), so it grows with the
// tenant's claims (the fold state) and its lineage rows; the lake side
// goes through the external sort like the others.

// goldKey orders by journal seq, then claim (silverKey).
func goldKey(k []byte, seq int64, artifact string, version int32) []byte {
	k = binary.BigEndian.AppendUint64(k, uint64(seq))
	return appendSilverKey(k, artifact, version)
}

func splitGoldKey(k []byte) (int64, string, int32) {
	if len(k) < 8 {
		return 0, "", 0
	}
	a, v := splitSilverKey(k[8:])
	return int64(binary.BigEndian.Uint64(k[:8])), a, v
}

// lineageFields are the compared columns of a lineage row, by name, in
// schema order (outbox_seq, the key columns and tenant_id aside).
func lineageFields(r tables.GoldLineageRow) [][2]string {
	return [][2]string{
		{"event_type", r.EventType}, {"event_hash", hex.EncodeToString(r.EventHash)},
		{"recorded_at", r.RecordedAt.UTC().Format(time.RFC3339Nano)}, {"actor", r.Actor}, {"reason", r.Reason},
		{"state_before", r.StateBefore}, {"state_after", r.StateAfter}, {"workarea_id", r.WorkareaID},
		{"to_workarea_id", r.ToWorkareaID}, {"writer", r.Writer}, {"principal", r.Principal},
		{"provenance", r.Provenance}, {"plaintext_digest", r.PlaintextDigest}, {"ciphertext_digest", r.CiphertextDigest},
		{"submitted_seq", fmt.Sprint(r.SubmittedSeq)}, {"prev_journal_seq", fmt.Sprint(r.PrevJournalSeq)},
	}
}

func encodeLineage(v []byte, r tables.GoldLineageRow) []byte {
	e := enc(v).int(r.OutboxSeq).str(r.TenantID)
	for _, f := range lineageFields(r) {
		e = e.str(f[1])
	}
	return e
}

func outboxOfLineage(v []byte) int64 { d := &dec{b: v}; return d.int() }

// decodeLineageFields reads encodeLineage's value: outbox seq, tenant and
// the compared fields' values in lineageFields' order.
func decodeLineageFields(v []byte) (int64, string, []string, error) {
	d := &dec{b: v}
	seq, tenant := d.int(), d.str()
	var vals []string
	for range lineageFields(tables.GoldLineageRow{}) {
		vals = append(vals, d.str())
	}
	return seq, tenant, vals, d.err
}

func (r *runner) sortGold(ctx context.Context, tenant uuid.UUID, t *table, s *extSort) error {
	cols := tables.LineageColumns()
	var kbuf, vbuf []byte
	return r.scan(ctx, tenant, t, cols.Columns(), func(row pq.Row) error {
		g := cols.Decode(row)
		vbuf = encodeLineage(vbuf[:0], g)
		kbuf = goldKey(kbuf[:0], g.JournalSeq, g.ArtifactID, g.Version)
		return s.add(kbuf, vbuf)
	})
}

type impliedLineage struct {
	key []byte
	row tables.GoldLineageRow
}

// impliedGold is the tenant's chain's gold.lineage rows in key order, and
// its gold.workareas rows in emission order (one replay serves both).
func impliedGold(ctx context.Context, tx pgx.Tx, tenant uuid.UUID) ([]impliedLineage, []areaChange, error) {
	evs, err := journal.ReadChain(ctx, tx, tenant)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: %w", err)
	}
	rows, err := journal.DeriveOutbox(tenant, evs)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: the chain of tenant %s does not replay, so its gold rows cannot be derived (run oml chain verify): %w", tenant, err)
	}
	bySeq := make(map[int64]journal.ReplayEvent, len(evs))
	at := make(map[int64]time.Time, len(evs))
	for _, e := range evs {
		bySeq[int64(e.Seq)] = e
		at[int64(e.Seq)] = e.RecordedAt
	}
	areas, err := impliedAreas(tenant, rows, at)
	if err != nil {
		return nil, nil, err
	}
	var out []impliedLineage
	for _, o := range rows {
		if o.Target != journal.TargetGoldLineage || o.ArtifactID == nil || o.Version == nil {
			continue
		}
		var p journal.LineagePayload
		if err := json.Unmarshal(o.Payload, &p); err != nil {
			return nil, nil, fmt.Errorf("reconcile: the fold's lineage payload for journal seq %d: %w", o.JournalSeq, err)
		}
		ev := bySeq[o.JournalSeq]
		g := tables.GoldLineageRow{TenantID: tenant.String(), ArtifactID: *o.ArtifactID, Version: int32(*o.Version),
			JournalSeq: o.JournalSeq, EventType: string(ev.Type), EventHash: append([]byte(nil), ev.Hash[:]...), RecordedAt: ev.RecordedAt,
			Actor: p.Actor, Reason: p.Reason, StateBefore: p.StateBefore, StateAfter: p.StateAfter, WorkareaID: p.WorkareaID,
			ToWorkareaID: p.ToWorkareaID, Writer: p.Writer, Principal: p.Principal, Provenance: p.Provenance,
			PlaintextDigest: p.PlaintextDigest, CiphertextDigest: p.CiphertextDigest, SubmittedSeq: p.SubmittedSeq, PrevJournalSeq: p.PrevSeq}
		out = append(out, impliedLineage{key: goldKey(nil, g.JournalSeq, g.ArtifactID, g.Version), row: g})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].key, out[j].key) < 0 })
	return out, areas, nil
}

// goldDeadLetters are the tenant's dead letters of the gold table target
// that explain a row's (or, for gold.workareas, a change's) absence, by
// key.
func goldDeadLetters(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, target string, cut int64) (map[string]bool, error) {
	rows, err := tx.Query(ctx, `
SELECT journal_seq, artifact_id, version
  FROM oml.dead_letter
 WHERE tenant_id = $1 AND target = $2 AND artifact_id IS NOT NULL AND version IS NOT NULL
   AND (reenqueued_at IS NULL OR abandoned_at IS NOT NULL OR new_outbox_seq > $3)`, tenant, target, cut)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the dead letters of %s: %w", target, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var seq int64
		var a string
		var v int32
		if err := rows.Scan(&seq, &a, &v); err != nil {
			return nil, fmt.Errorf("reconcile: read the dead letters of %s: %w", target, err)
		}
		out[string(goldKey(nil, seq, a, v))] = true
	}
	return out, rows.Err()
}

func (r *runner) mergeGold(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, t *table, it iterator, want []impliedLineage) error {
	dead, err := goldDeadLetters(ctx, tx, tenant, journal.TargetGoldLineage, t.sum.Cutoff)
	if err != nil {
		return err
	}
	tbl := string(tables.Gold)
	g := &grouper{it: it, outbox: outboxOfLineage}
	lake, err := g.next()
	if err != nil {
		return err
	}
	finding := func(cl Class, seq int64, a string, v int32, outbox int64, detail string, ev map[string]string) {
		r.add(Finding{Class: cl, Tenant: tenant, Table: tbl, Seq: seq, ArtifactID: a, Version: v, OutboxSeq: outbox, Detail: detail, Evidence: ev})
	}
	lakeOnly := func(lg *group) error {
		seq, a, v := splitGoldKey(lg.key)
		outbox, _, _, err := decodeLineageFields(lg.value)
		if err != nil {
			return err
		}
		finding(UnexpectedInLake, seq, a, v, outbox,
			fmt.Sprintf("gold.lineage row for journal seq %d, %s v%d: the journal implies no such change", seq, a, v),
			map[string]string{"lake_outbox_seqs": seqList(lg.seqs)})
		return nil
	}
	for _, w := range want {
		t.sum.FoldRows++
		for lake != nil && bytes.Compare(lake.key, w.key) < 0 {
			if err := lakeOnly(lake); err != nil {
				return err
			}
			if lake, err = g.next(); err != nil {
				return err
			}
		}
		c := w.row
		if lake == nil || !bytes.Equal(lake.key, w.key) {
			if c.JournalSeq <= t.sum.JournalCutoff && !dead[string(w.key)] {
				finding(MissingInLake, c.JournalSeq, c.ArtifactID, c.Version, 0,
					fmt.Sprintf("the %s at journal seq %d changed %s v%d (%s -> %s), at or below the cutoff %d, but gold.lineage has no row for it",
						c.EventType, c.JournalSeq, c.ArtifactID, c.Version, c.StateBefore, c.StateAfter, t.sum.JournalCutoff),
					map[string]string{"cutoff_outbox_seq": fmt.Sprint(t.sum.Cutoff)})
			}
			continue
		}
		outbox, tn, vals, err := decodeLineageFields(lake.value)
		if err != nil {
			return err
		}
		switch {
		case c.JournalSeq > t.sum.JournalSeen:
			finding(UnexpectedInLake, c.JournalSeq, c.ArtifactID, c.Version, outbox,
				fmt.Sprintf("gold.lineage row for journal seq %d, %s v%d is beyond the table's cutoff (journal seq %d, txn version %d)",
					c.JournalSeq, c.ArtifactID, c.Version, t.sum.JournalSeen, t.sum.TxnVersion),
				map[string]string{"lake_outbox_seqs": seqList(lake.seqs)})
		case lake.count > 1:
			finding(DuplicateInLake, c.JournalSeq, c.ArtifactID, c.Version, outbox,
				fmt.Sprintf("gold.lineage holds the change at journal seq %d to %s v%d %d times", c.JournalSeq, c.ArtifactID, c.Version, lake.count),
				map[string]string{"lake_outbox_seqs": seqList(lake.seqs), "count": fmt.Sprint(lake.count)})
		}
		if tn != tenant.String() {
			finding(DigestMismatch, c.JournalSeq, c.ArtifactID, c.Version, outbox,
				fmt.Sprintf("gold.lineage row for journal seq %d, %s v%d names tenant %s, not %s", c.JournalSeq, c.ArtifactID, c.Version, tn, tenant),
				map[string]string{"column": "tenant_id"})
		}
		for i, f := range lineageFields(c) {
			if vals[i] != f[1] {
				finding(DigestMismatch, c.JournalSeq, c.ArtifactID, c.Version, outbox,
					fmt.Sprintf("gold.lineage row for journal seq %d, %s v%d has %s %q, the journal says %q", c.JournalSeq, c.ArtifactID, c.Version, f[0], vals[i], f[1]),
					map[string]string{"column": f[0], "lake": vals[i], "journal": f[1]})
				break
			}
		}
		if lake, err = g.next(); err != nil {
			return err
		}
	}
	return g.rest(lake, lakeOnly)
}

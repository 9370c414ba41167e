package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// CheckFold replays tenant's stored chain (Replay) and compares the result
// with oml.claims and with the tenant's oml.outbox rows (re-enqueued copies
// excepted). It returns nil when they agree, else an error naming the first
// difference. Run it as the owner (or in a transaction whose oml.tenant_id
// is tenant); it reads, never writes.
func CheckFold(ctx context.Context, q Querier, tenant uuid.UUID) error {
	evs, err := readChain(ctx, q, tenant)
	if err != nil {
		return err
	}
	want, wantOutbox, err := Replay(tenant, evs)
	if err != nil {
		return err
	}
	got, err := readClaims(ctx, q, tenant)
	if err != nil {
		return err
	}
	for ref, w := range want {
		g, ok := got[ref]
		if !ok {
			return fmt.Errorf("tenant %s: the journal implies claim %s v%d but oml.claims has no row", tenant, ref.ArtifactID, ref.Version)
		}
		if d := claimDiff(w, g); d != "" {
			return fmt.Errorf("tenant %s: claim %s v%d differs from the journal fold: %s", tenant, ref.ArtifactID, ref.Version, d)
		}
	}
	for ref := range got {
		if _, ok := want[ref]; !ok {
			return fmt.Errorf("tenant %s: oml.claims has claim %s v%d that no journal event implies", tenant, ref.ArtifactID, ref.Version)
		}
	}
	gotOutbox, err := readOutbox(ctx, q, tenant)
	if err != nil {
		return err
	}
	marks, err := readPruneMarks(ctx, q, tenant)
	if err != nil {
		return err
	}
	// A journal older than gold has no gold rows for its earlier changes:
	// a gold table's implied rows may be missing before its first row in
	// the outbox, as after a prune (docs/gold.md, "Backfilling gold").
	backfill := func() error {
		for _, t := range []string{TargetGoldLineage, TargetGoldWorkareas} {
			if _, ok := marks[t]; !ok {
				marks[t] = 0
			}
		}
		return checkPrunedOutbox(tenant, wantOutbox, gotOutbox, marks)
	}
	if len(marks) > 0 {
		return backfill()
	}
	if err := strictOutbox(tenant, wantOutbox, gotOutbox); err != nil {
		if backfill() == nil {
			return nil
		}
		return err
	}
	return nil
}

// strictOutbox compares the implied rows with the outbox row by row, in
// order.
func strictOutbox(tenant uuid.UUID, wantOutbox, gotOutbox []OutboxRow) error {
	for i := 0; i < len(wantOutbox) || i < len(gotOutbox); i++ {
		if i >= len(gotOutbox) {
			w := wantOutbox[i]
			return fmt.Errorf("tenant %s: the journal implies outbox row %s %s for seq %d that oml.outbox lacks", tenant, w.Target, w.Op, w.JournalSeq)
		}
		if i >= len(wantOutbox) {
			return fmt.Errorf("tenant %s: oml.outbox row %d is implied by no journal event", tenant, gotOutbox[i].Seq)
		}
		if d := outboxDiff(wantOutbox[i], gotOutbox[i]); d != "" {
			return fmt.Errorf("tenant %s: oml.outbox row %d differs from the journal fold: %s", tenant, gotOutbox[i].Seq, d)
		}
	}
	return nil
}

func readChain(ctx context.Context, q Querier, tenant uuid.UUID) ([]ReplayEvent, error) {
	rows, err := q.Query(ctx, `SELECT seq, hash, recorded_at, event_type, payload FROM oml.journal WHERE tenant_id = $1 ORDER BY seq`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read the chain of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	var out []ReplayEvent
	for rows.Next() {
		var e ReplayEvent
		var seq int64
		var hash []byte
		var typ string
		if err := rows.Scan(&seq, &hash, &e.RecordedAt, &typ, &e.Payload); err != nil {
			return nil, err
		}
		e.Seq, e.Type = uint64(seq), Type(typ)
		copy(e.Hash[:], hash)
		out = append(out, e)
	}
	return out, rows.Err()
}

func readClaims(ctx context.Context, q Querier, tenant uuid.UUID) (map[ClaimRef]*Claim, error) {
	rows, err := q.Query(ctx, `SELECT artifact_id, version, workarea_id, writer, principal, provenance, plaintext_digest,
	                                   ciphertext_digest, state, submitted_seq, submitted_at, promoted_by, promoted_seq,
	                                   promoted_at, updated_at, last_seq
	                              FROM oml.claims WHERE tenant_id = $1`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read oml.claims of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	out := map[ClaimRef]*Claim{}
	for rows.Next() {
		c := &Claim{}
		if err := rows.Scan(&c.ArtifactID, &c.Version, &c.WorkareaID, &c.Writer, &c.Principal, &c.Provenance,
			&c.PlaintextDigest, &c.CiphertextDigest, &c.State, &c.SubmittedSeq, &c.SubmittedAt,
			&c.PromotedBy, &c.PromotedSeq, &c.PromotedAt, &c.UpdatedAt, &c.LastSeq); err != nil {
			return nil, err
		}
		out[ClaimRef{c.ArtifactID, c.Version}] = c
	}
	return out, rows.Err()
}

func readOutbox(ctx context.Context, q Querier, tenant uuid.UUID) ([]OutboxRow, error) {
	rows, err := q.Query(ctx, `SELECT seq, tenant_id, journal_seq, target, op, artifact_id, version, payload::text
	                             FROM oml.outbox o
	                            WHERE tenant_id = $1
	                              AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.new_outbox_seq = o.seq)
	                            ORDER BY seq`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read oml.outbox of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	var out []OutboxRow
	for rows.Next() {
		var o OutboxRow
		var payload string
		if err := rows.Scan(&o.Seq, &o.TenantID, &o.JournalSeq, &o.Target, &o.Op, &o.ArtifactID, &o.Version, &payload); err != nil {
			return nil, err
		}
		o.Payload = []byte(payload)
		out = append(out, o)
	}
	return out, rows.Err()
}

func claimDiff(w, g *Claim) string {
	type cmp struct {
		name      string
		want, got any
	}
	eqTime := func(a, b *time.Time) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Equal(*b)
	}
	for _, c := range []cmp{
		{"workarea_id", w.WorkareaID, g.WorkareaID}, {"writer", w.Writer, g.Writer}, {"principal", w.Principal, g.Principal},
		{"provenance", w.Provenance, g.Provenance}, {"state", w.State, g.State},
		{"submitted_seq", w.SubmittedSeq, g.SubmittedSeq}, {"last_seq", w.LastSeq, g.LastSeq},
		{"promoted_by", deref0(w.PromotedBy), deref0(g.PromotedBy)}, {"promoted_seq", deref0(w.PromotedSeq), deref0(g.PromotedSeq)},
	} {
		if !reflect.DeepEqual(c.want, c.got) {
			return fmt.Sprintf("%s is %v, the journal says %v", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(w.PlaintextDigest, g.PlaintextDigest) || !bytes.Equal(w.CiphertextDigest, g.CiphertextDigest) {
		return "the digests differ from the submission's"
	}
	if !w.SubmittedAt.Equal(g.SubmittedAt) || !w.UpdatedAt.Equal(g.UpdatedAt) || !eqTime(w.PromotedAt, g.PromotedAt) {
		return "a timestamp differs from its event's recorded_at"
	}
	return ""
}

func deref0[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func outboxDiff(w, g OutboxRow) string {
	if w.JournalSeq != g.JournalSeq || w.Target != g.Target || w.Op != g.Op {
		return fmt.Sprintf("it is %s %s of journal seq %d, the journal implies %s %s of seq %d", g.Target, g.Op, g.JournalSeq, w.Target, w.Op, w.JournalSeq)
	}
	if deref0(w.ArtifactID) != deref0(g.ArtifactID) || deref0(w.Version) != deref0(g.Version) {
		return "its artifact or version differs"
	}
	var wp, gp any
	if json.Unmarshal(w.Payload, &wp) != nil || json.Unmarshal(g.Payload, &gp) != nil || !reflect.DeepEqual(wp, gp) {
		return fmt.Sprintf("its payload %s differs from the implied %s", g.Payload, w.Payload)
	}
	return ""
}

// readPruneMarks reads how far `oml outbox prune` pruned each of tenant's
// tables (oml.outbox_pruned: target → through_seq).
func readPruneMarks(ctx context.Context, q Querier, tenant uuid.UUID) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT target, through_seq FROM oml.outbox_pruned WHERE tenant_id = $1`, tenant)
	if err != nil {
		return nil, fmt.Errorf("read the prune marks of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var target string
		var through int64
		if err := rows.Scan(&target, &through); err != nil {
			return nil, err
		}
		out[target] = through
	}
	return out, rows.Err()
}

// checkPrunedOutbox compares, target by target, the implied rows with the
// rows still in the outbox after a prune: an implied row may be missing
// only before the first row still there above the table's prune mark
// (prune deletes a seq prefix of each table's rows, keeping dead-lettered
// rows inside it); from there on every implied row must be there, in
// order.
func checkPrunedOutbox(tenant uuid.UUID, want, got []OutboxRow, marks map[string]int64) error {
	byTarget := func(rows []OutboxRow) map[string][]OutboxRow {
		m := map[string][]OutboxRow{}
		for _, r := range rows {
			m[r.Target] = append(m[r.Target], r)
		}
		return m
	}
	wants, gots := byTarget(want), byTarget(got)
	for target, ws := range wants {
		gs := gots[target]
		through, pruned := marks[target]
		p, pastMark := 0, false
		for _, w := range ws {
			if p < len(gs) && outboxDiff(w, gs[p]) == "" {
				pastMark = pastMark || gs[p].Seq > through
				p++
				continue
			}
			if pruned && !pastMark {
				continue // pruned: before every row still there above the mark
			}
			return fmt.Errorf("tenant %s: the journal implies outbox row %s %s for seq %d that oml.outbox lacks above its prune mark", tenant, w.Target, w.Op, w.JournalSeq)
		}
		if p < len(gs) {
			return fmt.Errorf("tenant %s: oml.outbox row %d is implied by no journal event (or out of order)", tenant, gs[p].Seq)
		}
	}
	for target, gs := range gots {
		if _, ok := wants[target]; !ok && len(gs) > 0 {
			return fmt.Errorf("tenant %s: oml.outbox row %d is implied by no journal event", tenant, gs[0].Seq)
		}
	}
	return nil
}

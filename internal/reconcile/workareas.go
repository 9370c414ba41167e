package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// ---- gold.workareas ----
//
// The comparand is the journal again: the gold.workareas rows the tenant's
// chain implies (journal.DeriveOutbox, in emission order), added up per
// workarea with tables.GoldWorkareaRow.Apply, the definition the lake
// writer's MERGE uses. A workarea's row must equal the sum of its changes
// at or below J (dead-lettered ones aside) plus a prefix, in emission
// order, of its changes in (J, S] (an event in (J, S] may be partly
// applied: a batch may end between the rows of one erasure or simulation
// end); compared column by column, last_outbox_seq only against the
// cutoff (it is drawn at insert, NULL for a row re-derived after prune). A
// workarea with a change at or below J and no row is missing; a row of a
// workarea the chain gives no change at or below S is unexpected; two rows
// of one workarea are a duplicate.
//
// Memory: the replay of the tenant's chain (shared with gold.lineage) and
// one row per workarea on each side; workareas are few next to claims, so
// the lake side is read into memory rather than through the external sort.

// areaChange is one implied gold.workareas row.
type areaChange struct {
	workarea   string
	journalSeq int64
	artifact   string
	version    int32
	change     tables.WorkareaChange
}

// impliedAreas is the chain's gold.workareas rows, in emission order.
func impliedAreas(tenant uuid.UUID, rows []journal.OutboxRow, at map[int64]time.Time) ([]areaChange, error) {
	var out []areaChange
	for _, o := range rows {
		if o.Target != journal.TargetGoldWorkareas || o.ArtifactID == nil || o.Version == nil {
			continue
		}
		var p journal.LineagePayload
		if err := json.Unmarshal(o.Payload, &p); err != nil {
			return nil, fmt.Errorf("reconcile: the fold's gold.workareas payload for journal seq %d of tenant %s: %w", o.JournalSeq, tenant, err)
		}
		out = append(out, areaChange{workarea: p.WorkareaID, journalSeq: o.JournalSeq, artifact: *o.ArtifactID, version: int32(*o.Version),
			change: tables.WorkareaChange{StateBefore: p.StateBefore, StateAfter: p.StateAfter, Writer: p.Writer,
				JournalSeq: o.JournalSeq, RecordedAt: at[o.JournalSeq]}})
	}
	return out, nil
}

// workareaFields are the compared columns of a workarea row, by name
// (tenant_id, the key and last_outbox_seq aside).
func workareaFields(r tables.GoldWorkareaRow) [][2]string {
	return [][2]string{
		{"claims", fmt.Sprint(r.Claims)}, {"promoted", fmt.Sprint(r.Promoted)}, {"demoted", fmt.Sprint(r.Demoted)},
		{"reassigned", fmt.Sprint(r.Reassigned)}, {"simulation_ended", fmt.Sprint(r.SimulationEnded)}, {"erased", fmt.Sprint(r.Erased)},
		{"writers", strings.Join(r.Writers, ",")}, {"changes", fmt.Sprint(r.Changes)},
		{"first_journal_seq", fmt.Sprint(r.FirstJournalSeq)}, {"first_changed_at", r.FirstChangedAt.UTC().Format(time.RFC3339Nano)},
		{"last_journal_seq", fmt.Sprint(r.LastJournalSeq)}, {"last_changed_at", r.LastChangedAt.UTC().Format(time.RFC3339Nano)},
	}
}

// firstDiff is the first compared column where lake and want differ.
func firstDiff(lake, want tables.GoldWorkareaRow) (col, l, w string, differ bool) {
	lf, wf := workareaFields(lake), workareaFields(want)
	for i := range wf {
		if lf[i][1] != wf[i][1] {
			return wf[i][0], lf[i][1], wf[i][1], true
		}
	}
	return "", "", "", false
}

// lakeAreas reads the table's rows by workarea (all copies of each).
func (r *runner) lakeAreas(ctx context.Context, tenant uuid.UUID, t *table) (map[string][]tables.GoldWorkareaRow, error) {
	cols := tables.WorkareaColumns()
	out := map[string][]tables.GoldWorkareaRow{}
	err := r.scan(ctx, tenant, t, cols.Columns(), func(row pq.Row) error {
		g := cols.Decode(row)
		out[g.WorkareaID] = append(out[g.WorkareaID], g)
		return nil
	})
	return out, err
}

// mergeWorkareas compares the table's rows with the rows the chain implies
// at the table's cutoff.
func (r *runner) mergeWorkareas(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, t *table, lake map[string][]tables.GoldWorkareaRow, implied []areaChange) error {
	dead, err := goldDeadLetters(ctx, tx, tenant, journal.TargetGoldWorkareas, t.sum.Cutoff)
	if err != nil {
		return err
	}
	type want struct {
		base    tables.GoldWorkareaRow
		due     bool                    // a change at or below J
		window  []tables.WorkareaChange // its changes in (J, S]
		beyondS bool
	}
	wants := map[string]*want{}
	var order []string
	for _, c := range implied {
		if dead[string(goldKey(nil, c.journalSeq, c.artifact, c.version))] {
			continue
		}
		w := wants[c.workarea]
		if w == nil {
			w = &want{base: tables.GoldWorkareaRow{TenantID: tenant.String(), WorkareaID: c.workarea}}
			wants[c.workarea] = w
			order = append(order, c.workarea)
		}
		switch {
		case c.journalSeq <= t.sum.JournalCutoff:
			w.base.Apply(c.change)
			w.due = true
		case c.journalSeq <= t.sum.JournalSeen:
			w.window = append(w.window, c.change)
		default:
			w.beyondS = true
		}
	}
	tbl := string(tables.Workareas)
	finding := func(cl Class, wa string, seq, outbox int64, detail string, ev map[string]string) {
		r.add(Finding{Class: cl, Tenant: tenant, Table: tbl, Workarea: wa, Seq: seq, OutboxSeq: outbox, Detail: detail, Evidence: ev})
	}
	sort.Strings(order)
	for _, wa := range order {
		w := wants[wa]
		t.sum.FoldRows++
		rows := lake[wa]
		delete(lake, wa)
		if len(rows) == 0 {
			if w.due {
				finding(MissingInLake, wa, w.base.LastJournalSeq, 0,
					fmt.Sprintf("workarea %s has %d change(s) at or below the cutoff (journal seq %d), but gold.workareas has no row for it", wa, w.base.Changes, t.sum.JournalCutoff),
					map[string]string{"cutoff_outbox_seq": fmt.Sprint(t.sum.Cutoff), "claims": fmt.Sprint(w.base.Claims)})
			}
			continue
		}
		got := rows[0]
		if len(rows) > 1 {
			finding(DuplicateInLake, wa, got.LastJournalSeq, got.LastOutboxSeq,
				fmt.Sprintf("gold.workareas holds %d rows for workarea %s", len(rows), wa), map[string]string{"count": fmt.Sprint(len(rows))})
		}
		if !w.due && len(w.window) == 0 {
			finding(UnexpectedInLake, wa, got.LastJournalSeq, got.LastOutboxSeq,
				fmt.Sprintf("gold.workareas row for workarea %s: the journal implies no change to it at or below the table's cutoff (journal seq %d, txn version %d)", wa, t.sum.JournalSeen, t.sum.TxnVersion),
				map[string]string{"lake_changes": fmt.Sprint(got.Changes)})
			continue
		}
		if got.TenantID != tenant.String() {
			finding(StateMismatch, wa, got.LastJournalSeq, got.LastOutboxSeq,
				fmt.Sprintf("gold.workareas row of workarea %s names tenant %s, not %s", wa, got.TenantID, tenant), map[string]string{"column": "tenant_id"})
		}
		if got.LastOutboxSeq > t.sum.Cutoff {
			finding(UnexpectedInLake, wa, got.LastJournalSeq, got.LastOutboxSeq,
				fmt.Sprintf("gold.workareas row of workarea %s carries outbox seq %d, beyond the table's cutoff %d: not written by the lake writer's protocol", wa, got.LastOutboxSeq, t.sum.Cutoff),
				map[string]string{"column": "last_outbox_seq"})
		}
		// Equal to the sum at J plus some prefix of the window.
		cand := w.base
		cand.Writers = append([]string(nil), w.base.Writers...)
		col, l, j, differ := firstDiff(got, cand)
		for i := 0; differ && i < len(w.window); i++ {
			cand.Apply(w.window[i])
			if _, _, _, d := firstDiff(got, cand); !d {
				differ = false
			}
		}
		if differ {
			finding(StateMismatch, wa, w.base.LastJournalSeq, got.LastOutboxSeq,
				fmt.Sprintf("gold.workareas row of workarea %s has %s %q, the journal fold says %q", wa, col, l, j),
				map[string]string{"column": col, "lake": l, "journal": j})
		}
	}
	rest := make([]string, 0, len(lake))
	for wa := range lake {
		rest = append(rest, wa)
	}
	sort.Strings(rest)
	for _, wa := range rest {
		got := lake[wa][0]
		finding(UnexpectedInLake, wa, got.LastJournalSeq, got.LastOutboxSeq,
			fmt.Sprintf("gold.workareas row for workarea %s: the journal implies no change to a promoted claim in it", wa),
			map[string]string{"lake_rows": fmt.Sprint(len(lake[wa]))})
	}
	return nil
}

package lakewriter

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// gold.workareas rows: the fold emits one beside each gold.lineage row,
// with the same payload (journal fold, addGold), so it is checked against
// the journal exactly as the lineage row is (checkLineage). It is not
// appended: the batch's changes are MERGEd into one row per workarea
// (tables.GoldWorkareaRow.Apply), copy-on-write like silver's retracts.
// Apply is commutative, so the row a commit leaves is the sum of every
// change the table's txn version covers, whatever batches they came in;
// the txn fence (apply.go) makes each change count exactly once.

func decodeWorkarea(it *item, payload string) error {
	seq := it.seq
	if it.op != journal.OpMaterialize && it.op != journal.OpRetract {
		return poisonf(seq, "gold.workareas rows must be materialize (a promotion) or retract (a later change), not %q", it.op)
	}
	if it.artifact == "" || it.version <= 0 {
		return poisonf(seq, "gold.workareas row without an artifact id and version")
	}
	var p journal.LineagePayload
	if err := strictJSON(payload, &p); err != nil {
		return poisonf(seq, "undecodable gold.workareas payload: %v", err)
	}
	if p.WorkareaID == "" {
		return poisonf(seq, "gold.workareas row of %s v%d names no workarea", it.artifact, it.version)
	}
	it.lin = &p
	return nil
}

// workareaChange is the change the (checked) row adds to its workarea.
func workareaChange(it *item) tables.WorkareaChange {
	c := tables.WorkareaChange{StateBefore: it.lin.StateBefore, StateAfter: it.lin.StateAfter, Writer: it.lin.Writer,
		JournalSeq: it.journalSeq, OutboxSeq: it.seq, RecordedAt: it.recordedAt}
	if it.derived {
		c.OutboxSeq = 0 // its outbox row was pruned (rederive.go)
	}
	return c
}

// workareaChanges groups rows by workarea, in first-seen order.
func workareaChanges(todo []*item) (map[string][]tables.WorkareaChange, []string) {
	byArea := map[string][]tables.WorkareaChange{}
	var order []string
	for _, it := range todo {
		wa := it.lin.WorkareaID
		if _, ok := byArea[wa]; !ok {
			order = append(order, wa)
		}
		byArea[wa] = append(byArea[wa], workareaChange(it))
	}
	return byArea, order
}

// mergeWorkareas applies the batch's changes to the rows of their
// workareas: the files mergeRows has are matched on their rows, those
// whose stats may hold one of them are scanned for the key column, the
// files that do are rewritten with the changes
// applied (remove + add), and workareas the table does not hold yet get a
// new row, in one new file.
func (d *Drainer) mergeWorkareas(ctx context.Context, w *delta.Writer, key tables.TableKey, todo []*item) (delta.Commit, commitStats, []*item, error) {
	byArea, order := workareaChanges(todo)
	var commit delta.Commit
	var stats commitStats
	snap := w.Snapshot()
	found := map[string]bool{}
	match := func(wa string) bool {
		if byArea[wa] != nil {
			found[wa] = true
			return true
		}
		return false
	}
	// Read whole (cols nil): a candidate is the tenant's file, which the
	// MERGE rewrites (locateKeys).
	hits, err := d.locateKeys(ctx, w, snap, key, nil,
		func(f *delta.Add) bool {
			return statsMayHold(f, tables.WorkareaID.Name(), byArea, func(wa string) string { return wa })
		},
		nil,
		func(r pq.Row) bool { return match(tables.WorkareaOf(r)) },
		"merge workareas")
	if err != nil {
		return commit, stats, nil, err
	}
	for _, l := range hits {
		if err := rewriteWorkareas(ctx, w, snap, key, l, byArea, &commit, &stats); err != nil {
			return commit, stats, nil, err
		}
	}
	var rows []pq.Row
	for _, wa := range order {
		if found[wa] {
			continue
		}
		r := tables.GoldWorkareaRow{TenantID: key.Tenant.String(), WorkareaID: wa}
		for _, c := range byArea[wa] {
			r.Apply(c)
		}
		rows = append(rows, r.Row())
	}
	if len(rows) > 0 {
		sortWorkareas(rows)
		if err := insertFile(ctx, w, key, rows, &commit, &stats); err != nil {
			return commit, stats, nil, err
		}
	}
	commit.Operation = "MERGE"
	pred, _ := json.Marshal(map[string]any{"on": "target.workarea_id = source.workarea_id"})
	commit.OperationParameters = map[string]any{"predicate": string(pred), "queryId": tables.AppID}
	commit.OperationMetrics = mergeMetrics(&commit, stats)
	return commit, stats, nil, nil
}

// rewriteWorkareas copies data file l.f with the changes applied to the
// rows of their workareas: the commit removes l.f and adds the copy.
func rewriteWorkareas(ctx context.Context, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey, l located,
	byArea map[string][]tables.WorkareaChange, commit *delta.Commit, stats *commitStats) error {
	return rewriteFile(ctx, w, snap, key, l, commit, stats, "merge workareas", sortWorkareas, func(raw pq.Row) pq.Row {
		cs := byArea[tables.WorkareaOf(raw)]
		if cs == nil {
			return raw
		}
		r := tables.DecodeWorkarea(raw)
		for _, c := range cs {
			r.Apply(c)
		}
		stats.merged++
		return r.Row()
	})
}

func sortWorkareas(rows []pq.Row) {
	sort.SliceStable(rows, func(i, j int) bool { return tables.WorkareaOf(rows[i]) < tables.WorkareaOf(rows[j]) })
}

// statsMayHold reports whether data file f's min/max stats of the string
// column col may hold one of the keys (col's value of a key is
// value(key)). A file without usable stats may. Silver's MERGE (by
// artifact_id) and gold/workareas' (by workarea_id) prune with it the
// files whose rows mergeRows does not have.
func statsMayHold[K comparable, V any](f *delta.Add, col string, keys map[K]V, value func(K) string) bool {
	var b struct {
		MinValues map[string]json.RawMessage `json:"minValues"`
		MaxValues map[string]json.RawMessage `json:"maxValues"`
	}
	if f.Stats == "" || json.Unmarshal([]byte(f.Stats), &b) != nil {
		return true
	}
	lo, lok := statString(b.MinValues[col])
	hi, hok := statString(b.MaxValues[col])
	for k := range keys {
		// The min is a prefix of the true min (≤ it); a max, when
		// present, is ≥ the true max (truncated with a tie-breaker).
		if v := value(k); (!lok || lo <= v) && (!hok || v <= hi) {
			return true
		}
	}
	return false
}

// statString is a stats bound that is a JSON string (absent, null or of
// another type: none).
func statString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

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
// workareas, copy-on-write. A small table (wholeMergeBytes) is rewritten
// whole: every live file's rows (from mergeRows, else read), the changes
// applied and the new workareas added, go into one new file that replaces
// them all. A larger one is merged file by file: the files mergeRows has
// are matched on their rows, those whose stats may hold one of the
// workareas are read, the files that do hold one are rewritten with the
// changes applied (remove + add), and workareas the table does not hold
// yet get a new row, in one new file.
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
	whole := !d.workareasByFile && mergesWhole(snap)
	mayHold := func(f *delta.Add) bool {
		return statsMayHold(f, tables.WorkareaID.Name(), byArea, func(wa string) string { return wa })
	}
	matchRow := func(r pq.Row) bool { return match(tables.WorkareaOf(r)) }
	if whole {
		// Every file is read and rewritten, whatever it holds.
		mayHold = func(*delta.Add) bool { return true }
		matchRow = func(r pq.Row) bool {
			match(tables.WorkareaOf(r))
			return true
		}
	}
	// Read whole (cols nil): a candidate is nearly always a file the MERGE
	// rewrites (locateKeys).
	hits, err := d.locateKeys(ctx, w, snap, key, nil, mayHold, nil, matchRow, "merge workareas")
	if err != nil {
		return commit, stats, nil, err
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
	edit := editWorkareas(byArea, &stats)
	if whole && len(hits) > 0 {
		err = rewriteFiles(ctx, w, snap, key, hits, rows, &commit, &stats, "merge workareas", sortWorkareas, edit)
	} else {
		for _, l := range hits {
			if err = rewriteFile(ctx, w, snap, key, l, &commit, &stats, "merge workareas", sortWorkareas, edit); err != nil {
				break
			}
		}
		if err == nil && len(rows) > 0 {
			sortWorkareas(rows)
			err = insertFile(ctx, w, key, rows, &commit, &stats)
		}
	}
	if err != nil {
		return commit, stats, nil, err
	}
	commit.Operation = "MERGE"
	pred, _ := json.Marshal(map[string]any{"on": "target.workarea_id = source.workarea_id"})
	commit.OperationParameters = map[string]any{"predicate": string(pred), "queryId": tables.AppID}
	commit.OperationMetrics = mergeMetrics(&commit, stats)
	return commit, stats, nil, nil
}

// wholeMergeBytes bounds the live data of a gold/workareas table its MERGE
// rewrites whole (mergesWhole). Such a table is one file of a few KB
// between commits (a tenant's workareas, a row each), so a commit reads at
// most one file (often from mergeRows) and writes one, however many of
// its workareas the batch changed or added; merged file by file, a table
// kept the files of every batch that brought a new workarea, each a
// candidate of later MERGEs whose stats spanned a key, and a commit wrote
// a file per workarea file it changed plus one for the new ones. Creating
// files was the largest share of the steady-state writer's CPU at 10,000
// tenants (docs/lake-writer.md, session 25). Beyond the bound a commit
// would copy rows it does not change for every change, so a large table is
// merged file by file (and compacted by oml lake optimize).
const wholeMergeBytes = 64 << 10

// mergesWhole reports whether a workareas MERGE rewrites snap's table whole:
// it has live files, of at most wholeMergeBytes in all.
func mergesWhole(snap *delta.Snapshot) bool {
	files := snap.Files()
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return len(files) > 0 && n <= wholeMergeBytes
}

// editWorkareas is the MERGE's edit of a row read back: the batch's changes
// to its workarea, if any, applied in order.
func editWorkareas(byArea map[string][]tables.WorkareaChange, stats *commitStats) func(pq.Row) pq.Row {
	return func(raw pq.Row) pq.Row {
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
	}
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

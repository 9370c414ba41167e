package lakewriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// tableResult is what applying one table's part of a batch did.
type tableResult struct {
	key       tables.TableKey
	skipped   bool    // the table already held the batch (txn version ≥ end)
	committed int64   // the Delta version committed, -1 if none
	rows      int     // rows appended
	merged    int     // rows changed by MERGE
	bytes     int64   // data bytes written
	poison    []*item // rows that failed for a reason of their own
	held      int     // rows not committed: the tenant was held for a forked chain during the batch
	latency   time.Duration
}

// maxConflictRetries bounds how often a table's part of a batch is redone
// after losing a commit race to a writer that did not apply this batch.
const maxConflictRetries = 5

// applyTable applies one table's rows of batch (from, to] and commits them
// with the txn action. It is idempotent: a table whose txn version is
// already ≥ to is skipped, and only rows above the table's txn version are
// applied.
func (d *Drainer) applyTable(ctx context.Context, key tables.TableKey, items []*item, from, to int64, catchUp bool) (tableResult, error) {
	res := tableResult{key: key, committed: -1}
	// A table is created only for a row that can enter it: a batch of
	// nothing but poison (say, rows of a ghost tenant) creates no table.
	missing := leaveMissing
	for _, it := range items {
		if it.poison == nil {
			missing = createMissing
			break
		}
	}
	if sc := d.startScan.get(key); sc != nil && sc.hasTxn && sc.txn >= to {
		res.skipped = true // read at start, under the lease (scan.go)
		return res, nil
	}
	for attempt := 0; ; attempt++ {
		w, err := d.tables.writer(ctx, key, missing)
		if err != nil {
			return res, err
		}
		if w == nil {
			res.poison = append(res.poison[:0], items...)
			return res, nil
		}
		applied := int64(-1)
		if v, ok := w.Snapshot().TxnVersion(tables.AppID); ok {
			applied = v
		}
		if applied >= to {
			res.skipped = true
			return res, nil
		}
		// The invariant "a table at txn version v holds every one of its
		// rows ≤ v" must survive this commit, which sets the version to
		// `to`. If the table is behind the batch start and has rows in
		// between (it was held for a forked chain, or the lake was
		// restored from an older copy), those rows go first.
		batch := items
		if applied < from && !d.isComplete(key, applied) {
			gap, err := d.gapRows(ctx, key, applied, from)
			if err != nil {
				return res, err
			}
			if len(gap) > 0 {
				d.log.Info("table is behind the batch; applying the rows it missed first",
					"table", key.String(), "txn_version", applied, "batch_start", from, "rows", len(gap))
				batch = append(gap, items...)
			}
		}
		var todo []*item
		res.poison = res.poison[:0]
		for _, it := range batch {
			if it.seq <= applied {
				continue // never re-apply a row the table already holds
			}
			if it.poison != nil {
				res.poison = append(res.poison, it)
				continue
			}
			todo = append(todo, it)
		}
		if len(res.poison) > 0 {
			return res, nil // the caller counts attempts / dead-letters, then retries
		}
		if len(todo) == 0 {
			res.skipped = true
			return res, nil
		}

		c, stats, poison, err := d.buildCommit(ctx, w, key, todo)
		if err != nil {
			return res, err
		}
		if len(poison) > 0 {
			res.poison = poison
			return res, nil
		}
		if err := d.crash(AfterDataFiles, key); err != nil {
			return res, err
		}
		c.Txn = &delta.Txn{AppID: tables.AppID, Version: to}
		c.Extra = d.commitRecord(from, to, catchUp).CommitInfo()
		if d.tenantHeld(key.Tenant) {
			// The witness publication beside this batch found the tenant's
			// chain forked since the batch dropped the held tenants: no
			// table of it commits from then on (its data files are left
			// unreferenced, like a crash at AfterDataFiles leaves them).
			d.forgetComplete(key)
			res.held = len(items)
			return res, nil
		}
		start := time.Now()
		v, err := w.Commit(ctx, c)
		res.latency = time.Since(start)
		if err == nil {
			res.committed, res.rows, res.merged, res.bytes = v, stats.rows, stats.merged, stats.bytes
			d.mergeRows.committed(key, &c, stats.written) // (mergerows.go)
			d.markComplete(key, to)                       // it holds its rows through `to` (complete.go)
			if key.Kind == tables.Bronze {
				d.bronzeSeen.committed(key.Tenant, todo, v) // the fork check's anchor (bronzeheads.go)
			}
			d.tables.resized(key, w)
			d.maybeCheckpoint(ctx, w, key)
			return res, nil
		}
		var conflict *delta.ConflictError
		var ambiguous *delta.AmbiguousCommitError
		switch {
		case errors.As(err, &conflict):
			if conflict.TxnApplied(tables.AppID, to) {
				d.log.Warn("another lake writer committed this batch first; skipping the table",
					"table", key.String(), "batch_end", to)
				res.skipped = true
				return res, nil
			}
			d.log.Warn("lost a commit race on a table; redoing its part of the batch",
				"table", key.String(), "batch_end", to, "error", err)
		case errors.Is(err, delta.ErrTxnNotNewer):
			res.skipped = true
			return res, nil
		case errors.As(err, &ambiguous), errors.Is(err, delta.ErrWriterBroken):
			d.log.Warn("commit outcome unknown; reopening the table to read its txn version",
				"table", key.String(), "error", err)
			d.tables.forget(key)
		default:
			return res, fmt.Errorf("commit to %s: %w", key, err)
		}
		if attempt >= maxConflictRetries {
			return res, fmt.Errorf("commit to %s: still losing commit races after %d attempts: %w", key, attempt+1, err)
		}
	}
}

// gapRows loads the table's own rows in (applied, from] that are not
// dead-lettered (one indexed probe first; usually there are none).
func (d *Drainer) gapRows(ctx context.Context, key tables.TableKey, applied, from int64) ([]*item, error) {
	if from <= 0 {
		return nil, nil // (applied, 0] is empty (a catch-up from 0 already carries every row)
	}
	missed, err := outbox.TableHasLiveRows(ctx, d.db, key.Tenant, string(key.Kind), max(applied, 0), from)
	if err != nil {
		return nil, fmt.Errorf("look for rows %s missed before the batch: %w", key, err)
	}
	if !missed {
		return nil, nil
	}
	scope := key
	return loadBatch(ctx, d.db, d.chk, max(applied, 0), from, &scope)
}

type commitStats struct {
	rows, merged int
	bytes        int64
	written      []writtenFile // a MERGE's new files, for mergeRows
}

func (d *Drainer) buildCommit(ctx context.Context, w *delta.Writer, key tables.TableKey, todo []*item) (delta.Commit, commitStats, []*item, error) {
	if key.Kind == tables.Workareas {
		return d.mergeWorkareas(ctx, w, key, todo) // workareas.go
	}
	if key.Kind != tables.Silver {
		rows := make([]pq.Row, 0, len(todo))
		for _, it := range todo {
			rows = append(rows, it.row)
		}
		add, err := w.WriteFile(ctx, map[string]*string{}, rows)
		if err != nil {
			return delta.Commit{}, commitStats{}, nil, fmt.Errorf("write a data file for %s: %w", key, err)
		}
		return delta.Commit{
				Operation:           "STREAMING UPDATE",
				OperationParameters: map[string]any{"outputMode": "Append", "queryId": tables.AppID},
				OperationMetrics:    map[string]any{"numAddedFiles": "1", "numOutputRows": fmt.Sprint(len(rows)), "numOutputBytes": fmt.Sprint(add.Size)},
				Adds:                []*delta.Add{add},
			}, commitStats{rows: len(rows), bytes: add.Size},
			nil, nil
	}
	return d.mergeSilver(ctx, w, key, todo)
}

type claimKey struct {
	artifact string
	version  int32
}

// mergeSilver folds the batch's silver operations per (artifact_id,
// version) in seq order: a promotion inserts a row; a retract sets the
// state of the row inserted earlier in the batch, or of a row already in
// the table. Rows already in the table are changed copy-on-write: only the
// files whose stats may hold a retracted key are read, and only the files
// that do hold one are rewritten (remove + add in the same commit).
func (d *Drainer) mergeSilver(ctx context.Context, w *delta.Writer, key tables.TableKey, todo []*item) (delta.Commit, commitStats, []*item, error) {
	m := foldSilver(todo)
	var stats commitStats
	var commit delta.Commit
	if len(m.existing) > 0 {
		snap := w.Snapshot()
		hits, found, err := d.locate(ctx, m, w, snap, key)
		if err != nil {
			return commit, stats, nil, err
		}
		poison, err := m.missing(key, found)
		if err != nil || len(poison) > 0 {
			return commit, stats, poison, err
		}
		for _, l := range hits {
			if err := m.rewrite(ctx, w, snap, key, l, &commit, &stats); err != nil {
				return commit, stats, nil, err
			}
		}
	}
	if len(m.order) > 0 {
		if err := m.insert(ctx, w, key, &commit, &stats); err != nil {
			return commit, stats, nil, err
		}
	}
	describeSilverCommit(&commit, stats)
	return commit, stats, nil, nil
}

// silverMerge is a batch's silver operations folded per claim: the rows
// the batch inserts (in first-seen order, a retract later in the batch
// already applied to them), and the retracts of rows already in the table.
type silverMerge struct {
	inserts  map[claimKey]pq.Row
	order    []claimKey
	existing map[claimKey]*change
}

func foldSilver(todo []*item) *silverMerge {
	m := &silverMerge{inserts: map[claimKey]pq.Row{}, existing: map[claimKey]*change{}}
	for _, it := range todo {
		k := claimKey{it.artifact, it.version}
		if it.retract == nil {
			if _, dup := m.inserts[k]; !dup {
				m.order = append(m.order, k)
			}
			row := append(pq.Row(nil), it.row...)
			m.inserts[k] = row
			continue
		}
		if row, ok := m.inserts[k]; ok {
			setRetract(row, it)
			continue
		}
		m.existing[k] = &change{it: it}
	}
	return m
}

// locate finds the live files that hold a retracted claim, and which
// claims were found at all.
func (d *Drainer) locate(ctx context.Context, m *silverMerge, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey) ([]located, map[claimKey]bool, error) {
	found := map[claimKey]bool{}
	match := func(k claimKey) bool {
		if _, ok := m.existing[k]; ok {
			found[k] = true
			return true
		}
		return false
	}
	keys := tables.SilverColumns(tables.SilverArtifactID, tables.SilverVersion)
	hits, err := d.locateKeys(ctx, w, snap, key, keys.Columns(),
		func(f *delta.Add) bool {
			return statsMayHold(f, tables.SilverArtifactID.Name(), m.existing, func(k claimKey) string { return k.artifact })
		},
		func(r pq.Row) bool { c := keys.Decode(r); return match(claimKey{c.ArtifactID, c.Version}) },
		func(r pq.Row) bool { a, v := tables.SilverClaim(r); return match(claimKey{a, v}) },
		"merge retracts")
	return hits, found, err
}

// missing turns the retracts of claims the table does not hold into
// poison rows, in seq order. A re-derived retract (its outbox row was
// pruned) of a claim a rebuilt table lacks is an error instead: the
// journal implies the claim is there.
func (m *silverMerge) missing(key tables.TableKey, found map[claimKey]bool) ([]*item, error) {
	var poison []*item
	for k, c := range m.existing {
		if !found[k] {
			if c.it.derived {
				return nil, fmt.Errorf("rebuild %s: the retract journal seq %d implies (its outbox row was pruned) names %s v%d, which the rebuilt table lacks; run oml reconcile",
					key, c.it.journalSeq, k.artifact, k.version)
			}
			poison = append(poison, &item{seq: c.it.seq, journalSeq: c.it.journalSeq, table: key, target: c.it.target, op: c.it.op,
				artifact: k.artifact, version: k.version,
				poison: poisonf(c.it.seq, "retract of %s v%d, which is not in %s (was its promotion dead-lettered?)", k.artifact, k.version, key)})
		}
	}
	sort.Slice(poison, func(i, j int) bool { return poison[i].seq < poison[j].seq })
	return poison, nil
}

// rewrite copies data file l.f with the retracts applied to its rows: the
// commit removes l.f and adds the copy.
func (m *silverMerge) rewrite(ctx context.Context, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey, l located, commit *delta.Commit, stats *commitStats) error {
	return rewriteFile(ctx, w, snap, key, l, commit, stats, "merge retracts", sortSilver, func(r pq.Row) pq.Row {
		a, v := tables.SilverClaim(r)
		if c, ok := m.existing[claimKey{a, v}]; ok {
			setRetract(r, c.it)
			stats.merged++
		}
		return r
	})
}

// located is a candidate file of a MERGE found to hold a key it changes,
// with the file's rows when they are in hand (have: from mergeRows, or
// read whole by locateKeys), so rewriteFile need not read it.
type located struct {
	f    *delta.Add
	rows []pq.Row
	have bool
}

// locateKeys finds the live files that hold a key the MERGE changes. A
// file mergeRows has is matched on its rows (matchRow, given a full row);
// of the others, those whose stats may hold a key (mayHold) are read —
// for the key columns cols only (matchKeys, given the projected row), or,
// when cols is nil, whole (matchRow), keeping the rows of those that hold
// a key for the rewrite. Both are called for every row, so they may record
// which keys were found. what names the MERGE in a read error.
//
// Whole suits a table whose candidates nearly always hold a key and are
// rewritten: gold/workareas, one small file per tenant whose stats span
// its workareas. Read by key columns first, each such file was opened,
// its footer decoded and its key column read, then all of it read again
// by rewriteFile (about 3% of the steady-state lag run's CPU at 10,000
// tenants, where most MERGEs miss mergeRows). Silver's retracts keep the
// key columns: stats prune little there (random artifact ids), and most
// candidates hold none of the keys.
func (d *Drainer) locateKeys(ctx context.Context, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey, cols []string,
	mayHold func(*delta.Add) bool, matchKeys, matchRow func(pq.Row) bool, what string) ([]located, error) {
	files := snap.Files()
	hit := map[string]bool{}
	have := map[string][]pq.Row{}
	var scan []*delta.Add
	for _, f := range files {
		rows, ok := d.mergeRows.get(key, f)
		if !ok {
			if mayHold(f) {
				scan = append(scan, f)
			}
			continue
		}
		for _, r := range rows {
			if matchRow(r) {
				hit[f.Path] = true
			}
		}
		if hit[f.Path] {
			have[f.Path] = cloneRows(rows) // the MERGE edits them
		}
	}
	if len(scan) > 0 {
		whole := cols == nil
		match := matchKeys
		if whole {
			match = matchRow
		}
		read := map[string][]pq.Row{}
		err := snap.Scan(ctx, w.Store(), delta.ScanOptions{Columns: cols, Files: scan}, func(f *delta.Add, rows []pq.Row) error {
			for _, r := range rows {
				if match(r) {
					hit[f.Path] = true
				}
			}
			if whole {
				read[f.Path] = append(read[f.Path], rows...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s to %s: %w", key, what, err)
		}
		for p, rows := range read {
			if hit[p] {
				have[p] = rows // read for this MERGE alone: it may edit them
			}
		}
	}
	var out []located
	for _, f := range files {
		if hit[f.Path] {
			rows, ok := have[f.Path]
			out = append(out, located{f: f, rows: rows, have: ok})
		}
	}
	return out, nil
}

// rewriteFile is a MERGE's copy-on-write step, one home for silver's and
// gold/workareas': every row of data file l.f (from mergeRows, else read
// from the store) passes through edit, the rows are put in the table's
// order (sortRows) and written as one new file, and the commit removes
// l.f and adds the copy. what names the MERGE in a read error.
func rewriteFile(ctx context.Context, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey, l located,
	commit *delta.Commit, stats *commitStats, what string, sortRows func([]pq.Row), edit func(pq.Row) pq.Row) error {
	return rewriteFiles(ctx, w, snap, key, []located{l}, nil, commit, stats, what, sortRows, edit)
}

// rewriteFiles is rewriteFile of several files into one, with the MERGE's
// new rows (inserts, counted as inserted) beside theirs: gold/workareas'
// MERGE of a whole small table (mergesWhole).
func rewriteFiles(ctx context.Context, w *delta.Writer, snap *delta.Snapshot, key tables.TableKey, ls []located, inserts []pq.Row,
	commit *delta.Commit, stats *commitStats, what string, sortRows func([]pq.Row), edit func(pq.Row) pq.Row) error {
	var rows []pq.Row
	for _, l := range ls {
		fileRows := l.rows
		if !l.have {
			err := snap.Scan(ctx, w.Store(), delta.ScanOptions{Files: []*delta.Add{l.f}}, func(_ *delta.Add, batch []pq.Row) error {
				fileRows = append(fileRows, batch...)
				return nil
			})
			if err != nil {
				return fmt.Errorf("read %s to %s: %w", key, what, err)
			}
		}
		for _, r := range fileRows {
			rows = append(rows, edit(r))
		}
		path, err := delta.DecodePath(l.f.Path)
		if err != nil {
			return err
		}
		rm, err := w.Remove(path)
		if err != nil {
			return err
		}
		commit.Removes = append(commit.Removes, rm)
	}
	rows = append(rows, inserts...)
	sortRows(rows)
	add, err := w.WriteFile(ctx, map[string]*string{}, rows)
	if err != nil {
		return fmt.Errorf("rewrite a data file of %s: %w", key, err)
	}
	commit.Adds = append(commit.Adds, add)
	stats.rows += len(inserts)
	stats.bytes += add.Size
	stats.written = append(stats.written, writtenFile{add: add, rows: rows})
	return nil
}

// insert writes the batch's new claims as one data file.
func (m *silverMerge) insert(ctx context.Context, w *delta.Writer, key tables.TableKey, commit *delta.Commit, stats *commitStats) error {
	rows := make([]pq.Row, 0, len(m.order))
	for _, k := range m.order {
		rows = append(rows, m.inserts[k])
	}
	sortSilver(rows)
	return insertFile(ctx, w, key, rows, commit, stats)
}

// insertFile writes a MERGE's new rows (sorted) as one data file the commit
// adds. The rows are mergeRows' once the commit lands: the caller does not
// change them after.
func insertFile(ctx context.Context, w *delta.Writer, key tables.TableKey, rows []pq.Row, commit *delta.Commit, stats *commitStats) error {
	add, err := w.WriteFile(ctx, map[string]*string{}, rows)
	if err != nil {
		return fmt.Errorf("write a data file for %s: %w", key, err)
	}
	commit.Adds = append(commit.Adds, add)
	stats.rows += len(rows)
	stats.bytes += add.Size
	stats.written = append(stats.written, writtenFile{add: add, rows: rows})
	return nil
}

// describeSilverCommit names the commit the way Spark would: a streaming
// append, or a MERGE when it rewrites files.
func describeSilverCommit(commit *delta.Commit, stats commitStats) {
	commit.Operation = "STREAMING UPDATE"
	commit.OperationParameters = map[string]any{"outputMode": "Append", "queryId": tables.AppID}
	if len(commit.Removes) > 0 {
		commit.Operation = "MERGE"
		pred, _ := json.Marshal(map[string]any{"on": "target.artifact_id = source.artifact_id AND target.version = source.version"})
		commit.OperationParameters = map[string]any{"predicate": string(pred), "queryId": tables.AppID}
	}
	commit.OperationMetrics = mergeMetrics(commit, stats)
}

// mergeMetrics are the operationMetrics Spark records for a MERGE (and
// for silver's streaming append, which has the same counts).
func mergeMetrics(commit *delta.Commit, stats commitStats) map[string]any {
	return map[string]any{
		"numTargetRowsInserted": fmt.Sprint(stats.rows),
		"numTargetRowsUpdated":  fmt.Sprint(stats.merged),
		"numTargetFilesAdded":   fmt.Sprint(len(commit.Adds)),
		"numTargetFilesRemoved": fmt.Sprint(len(commit.Removes)),
		"numOutputBytes":        fmt.Sprint(stats.bytes),
	}
}

func setRetract(row pq.Row, it *item) {
	row[tables.SilverState] = it.retract.state
	row[tables.SilverJournalSeq] = it.journalSeq
	row[tables.SilverOutboxSeq] = it.seq
	if it.derived {
		row[tables.SilverOutboxSeq] = nil // its outbox row was pruned (rederive.go)
	}
	row[tables.SilverUpdatedAt] = it.retract.updatedAt
}

func sortSilver(rows []pq.Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		ai, vi := tables.SilverClaim(rows[i])
		aj, vj := tables.SilverClaim(rows[j])
		if ai != aj {
			return ai < aj
		}
		return vi < vj
	})
}

// change is the last retract of a key already in the table.
type change struct{ it *item }

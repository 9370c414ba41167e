package lakerepair

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/reconcile"
)

// Row-level repairs: the classes oml reconcile reports for a table whose
// history agrees with the database's. Every affected key (a bronze event's
// journal seq, a silver claim's artifact id and version) is repaired the
// same way: every copy the table holds is removed (copy-on-write: the
// files holding one are rewritten without it) and the rows the database
// says the key must hold at the table's cutoff (none or one, built by the
// drain's own code, lakewriter.TableRows) are added. That one rule covers
// missing-in-lake (nothing to remove, one row to add), unexpected-in-lake
// (copies to remove, nothing to add — or the right row, when the key is
// the journal's but the row is not), duplicate-in-lake (all copies out,
// one in) and digest-/state-mismatch (the wrong row out, the journal's
// in). A data file the log lists but the store lost (or that is not
// readable Parquet) is removed from the log; its rows are then found
// missing by the next pass and put back.

// The reconcile classes this file repairs.
const (
	MissingInLake    = Class(reconcile.MissingInLake)
	UnexpectedInLake = Class(reconcile.UnexpectedInLake)
	DuplicateInLake  = Class(reconcile.DuplicateInLake)
	DigestMismatch   = Class(reconcile.DigestMismatch)
	StateMismatch    = Class(reconcile.StateMismatch)
	CorruptFile      = Class(reconcile.CorruptFile)
)

// ActionRewrite is a row-level repair commit.
const ActionRewrite = "rewrite"

// BelowPruneMark is a table whose txn version is below its outbox prune
// mark (oml.outbox_pruned): restored from an old copy, or rewound below
// it. The drain holds it (the rows in between are gone from the outbox);
// the repair catches it up from rows re-derived from the journal.
const BelowPruneMark Class = "below-prune-mark"

// RowClasses are the classes repaired row by row.
var RowClasses = []Class{MissingInLake, UnexpectedInLake, DuplicateInLake, DigestMismatch, StateMismatch, CorruptFile, BelowPruneMark}

// notHere are the reconcile classes repair leaves to other commands.
var notHere = map[reconcile.Class][2]string{
	reconcile.DeadLettered:     {"a dead-lettered row is knowingly absent; repair its cause and re-enqueue it", "oml deadletter reenqueue ID (oml deadletter list)"},
	reconcile.StaleFrontier:    {"lag, not a wrong row: the lake writer has not drained that far yet", "oml lake drain (see oml lake status)"},
	reconcile.ErasedKeyPresent: {"a data key in PostgreSQL, not a lake row", "see docs/erasure.md"},
}

// rowWork is what the findings say about one table.
type rowWork struct {
	key     tables.TableKey
	classes map[string]int64
	keys    map[string]bool // encoded keys to remove and rebuild
	missing map[string]bool // the keys that are missing-in-lake
	files   map[string]bool // data files to drop from the log (lost or corrupt)
	breach  int64           // never-promoted claims found in silver
	// catchUp: the table is below its prune mark; the repair puts back
	// every wrong key up to limit (the cutoff) and sets its txn version
	// to limit.
	catchUp bool
	// limit is the outbox seq up to which rows are put back: the table's
	// txn version (a table at txn version v holds every row ≤ v; rows
	// above it are the drain's to apply, and putting them back here would
	// make the drain apply them twice), or, for a table that is gone, the
	// cutoff its rebuild is committed at.
	limit int64
}

// encodeBronze / encodeSilver are the affected-key encodings.
func encodeBronze(seq int64) string {
	return "b" + string(binary.BigEndian.AppendUint64(nil, uint64(seq)))
}
func encodeSilver(a string, v int32) string {
	return "s" + a + "\x00" + string(binary.BigEndian.AppendUint32(nil, uint32(v)))
}

// encodeWorkarea is a gold.workareas key: the row's workarea.
func encodeWorkarea(wa string) string { return "w" + wa }

// decodeSilverKeys / decodeBronzeKeys are the reverse of the encodings:
// the artifact ids and versions, or the journal seqs, of a set of keys.
func decodeSilverKeys(keys map[string]bool) ([]string, []int32) {
	arts := make([]string, 0, len(keys))
	vers := make([]int32, 0, len(keys))
	for k := range keys {
		body := k[1:]
		i := strings.LastIndexByte(body[:len(body)-4], 0)
		arts = append(arts, body[:i])
		vers = append(vers, int32(binary.BigEndian.Uint32([]byte(body[len(body)-4:]))))
	}
	return arts, vers
}

func decodeBronzeKeys(keys map[string]bool) []int64 {
	js := make([]int64, 0, len(keys))
	for k := range keys {
		js = append(js, int64(binary.BigEndian.Uint64([]byte(k[1:]))))
	}
	return js
}

// findRowWork runs the reconcile audit over the scope and collects, per
// table, the complete set of affected keys (reconcile keeps only
// MaxFindings per class in its report; OnFinding sees them all).
func findRowWork(ctx context.Context, opts Options, plan *Plan) (map[tables.TableKey]*rowWork, error) {
	work := map[tables.TableKey]*rowWork{}
	other := map[string]*Skipped{}
	get := func(key tables.TableKey) *rowWork {
		w := work[key]
		if w == nil {
			w = &rowWork{key: key, classes: map[string]int64{}, keys: map[string]bool{}, missing: map[string]bool{}, files: map[string]bool{}}
			work[key] = w
		}
		return w
	}
	rep, err := reconcile.Run(ctx, opts.Pool, opts.Lake, reconcile.Options{
		Tenant: opts.Tenant, StaleAfter: -1, MaxFindings: 1,
		OnFinding: func(f reconcile.Finding) {
			if why, ok := notHere[f.Class]; ok {
				k := string(f.Class) + "/" + f.Tenant.String() + "/" + f.Table
				if s := other[k]; s != nil {
					s.Count++
					return
				}
				other[k] = &Skipped{Tenant: f.Tenant, Table: f.Table, Class: string(f.Class), Count: 1, Reason: why[0], Command: why[1]}
				return
			}
			kind := tables.Kind(f.Table)
			key := tables.TableKey{Tenant: f.Tenant, Kind: kind}
			if (opts.Kind != "" && opts.Kind != kind) || !opts.wants(Class(f.Class)) || f.Table == "" {
				return
			}
			if file := f.Evidence["file"]; file != "" && (f.Class == reconcile.MissingInLake || f.Class == reconcile.CorruptFile) {
				w := get(key)
				w.classes[string(f.Class)]++
				w.files[file] = true
				return
			}
			if f.Class == reconcile.CorruptFile {
				k := "corrupt-log/" + key.Path()
				other[k] = &Skipped{Tenant: f.Tenant, Table: f.Table, Class: string(f.Class), Count: 1,
					Reason: "the table's Delta log itself cannot be read: " + f.Detail, Command: "restore the log file from a backup (docs/runbooks/delta.md)"}
				return
			}
			w := get(key)
			w.classes[string(f.Class)]++
			k := encodeBronze(f.Seq)
			switch kind {
			case tables.Silver:
				k = encodeSilver(f.ArtifactID, f.Version)
			case tables.Workareas:
				k = encodeWorkarea(f.Workarea)
			}
			if f.Class == reconcile.MissingInLake {
				w.missing[k] = true
			}
			if kind == tables.Silver {
				w.keys[k] = true
				if f.Class == reconcile.UnexpectedInLake && strings.HasPrefix(f.Detail, "containment breach") {
					w.breach++
				}
				return
			}
			w.keys[k] = true
		},
	})
	if err != nil {
		return nil, err
	}
	marks, err := lakewriter.PruneMarks(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	for _, tn := range rep.Tenants {
		for _, ts := range tn.Tables {
			key, ok := parseTablePath(ts.Table)
			if !ok || !opts.inScope(key) || !ts.Exists || ts.TxnVersion <= 0 || marks[key] <= ts.TxnVersion || !opts.wants(BelowPruneMark) {
				continue
			}
			// Below its prune mark (restored from an old copy, rewound
			// below it): the drain holds it, since rows in (txn, mark]
			// are gone from the outbox. The repair catches it up to its
			// cutoff from rows re-derived from the journal: every key
			// reconcile found wrong at the cutoff is put back, and the
			// commit sets the txn version to the cutoff.
			if ts.Cutoff < marks[key] {
				other["below-mark/"+key.Path()] = &Skipped{Tenant: key.Tenant, Table: string(key.Kind), Class: string(BelowPruneMark), Count: 1,
					Reason:  fmt.Sprintf("%s is at txn version %d, below its prune mark %d, and is compared only up to %d (its tenant is held by the chain check)", key, ts.TxnVersion, marks[key], ts.Cutoff),
					Command: "oml chain verify (then oml lake repair again)"}
				continue
			}
			w := get(key)
			w.classes[string(BelowPruneMark)] = 1
			w.catchUp = true
		}
	}
	for _, tn := range rep.Tenants {
		for _, ts := range tn.Tables {
			for key, w := range work {
				if key.Path() != ts.Table {
					continue
				}
				w.limit = ts.Cutoff
				if !ts.Exists || ts.TxnVersion >= ts.Cutoff || w.catchUp {
					continue
				}
				// Behind the frontier (a table no recent batch touched,
				// or just rewound, rebuilt or held): the drain's catch-up
				// applies its rows above the txn version, gap rows first,
				// but never re-applies one at or below it — those the
				// repair puts back (TestRepair_WhileDrainsRunAndThe
				// ApplicationWrites caught them left missing for ever).
				w.limit = max(ts.TxnVersion, 0)
				mine, err := keysAtOrBelow(ctx, opts.Pool, key, w.missing, w.limit)
				if err != nil {
					return nil, err
				}
				drains := map[string]bool{}
				for k := range w.missing {
					if !mine[k] {
						drains[k] = true
					}
				}
				if n := int64(len(drains)); n > 0 {
					for k := range drains {
						delete(w.keys, k)
						delete(w.missing, k)
					}
					w.classes[string(reconcile.MissingInLake)] -= n
					if w.classes[string(reconcile.MissingInLake)] <= 0 {
						delete(w.classes, string(reconcile.MissingInLake))
					}
					plan.Pending = append(plan.Pending, Skipped{Tenant: key.Tenant, Table: string(key.Kind), Class: string(reconcile.MissingInLake), Count: n,
						Reason:  fmt.Sprintf("%s is at txn version %d, behind the frontier %d: the next drain applies its rows above it", key, ts.TxnVersion, ts.Cutoff),
						Command: "oml lake drain --once"})
				}
			}
		}
	}
	keys := make([]string, 0, len(other))
	for k := range other {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		plan.NotRepaired = append(plan.NotRepaired, *other[k])
	}
	return work, nil
}

// keysAtOrBelow returns those of keys (encoded, missing from the table)
// that have a row at or below limit, pruned from the outbox or not: the
// rows the table's txn version says it holds, which no drain will apply
// again.
func keysAtOrBelow(ctx context.Context, pool *pgxpool.Pool, key tables.TableKey, keys map[string]bool, limit int64) (map[string]bool, error) {
	found := map[string]bool{}
	if len(keys) == 0 {
		return found, nil
	}
	rows, err := lakewriter.TableRowsThrough(ctx, pool, key, limit, selection(key, keys))
	if err != nil {
		return nil, fmt.Errorf("read the rows of %s at or below its txn version: %w", key, err)
	}
	for _, r := range rows {
		found[builtKey(key, r)] = true
	}
	return found, nil
}

// selection is the lakewriter selection of a set of encoded keys.
func selection(key tables.TableKey, keys map[string]bool) *lakewriter.RowKeys {
	sel := &lakewriter.RowKeys{}
	if key.Kind == tables.Workareas {
		for k := range keys {
			sel.Workareas = append(sel.Workareas, k[1:])
		}
		return sel
	}
	if key.Kind == tables.Silver {
		arts, vers := decodeSilverKeys(keys)
		for i := range arts {
			sel.Claims = append(sel.Claims, lakewriter.ClaimRef{ArtifactID: arts[i], Version: vers[i]})
		}
		return sel
	}
	sel.JournalSeqs = decodeBronzeKeys(keys)
	return sel
}

// builtKey is the encoded key of a row lakewriter built.
func builtKey(key tables.TableKey, r lakewriter.TableRow) string {
	if key.Kind == tables.Workareas {
		return encodeWorkarea(r.Workarea)
	}
	if key.Kind == tables.Silver {
		return encodeSilver(r.Claim.ArtifactID, r.Claim.Version)
	}
	return encodeBronze(r.JournalSeq)
}

// planRows turns the collected work into table plans (read-only: it
// scans the tables to find the files holding affected keys).
func planRows(ctx context.Context, opts Options, plan *Plan) error {
	work, err := findRowWork(ctx, opts, plan)
	if err != nil {
		return err
	}
	names, err := tenantNames(ctx, opts.Pool)
	if err != nil {
		return err
	}
	for _, w := range work {
		if len(w.keys) == 0 && len(w.files) == 0 && !w.catchUp {
			continue
		}
		tp, err := planRewrite(ctx, opts, w)
		if err != nil {
			return err
		}
		tp.TenantName = names[w.key.Tenant]
		plan.Tables = append(plan.Tables, *tp)
	}
	return nil
}

// keyColumns are the columns that make a table's key.
func keyColumns(k tables.Kind) []string {
	if k == tables.Silver {
		return []string{"artifact_id", "version"}
	}
	if k == tables.Gold {
		// Gold rows are repaired per journal event, like bronze: every
		// lineage row of the event is removed and put back.
		return []string{tables.LineageJournalSeq.Name()}
	}
	if k == tables.Workareas {
		// One row per workarea: every copy out, the sum of its changes in.
		return []string{tables.WorkareaID.Name()}
	}
	return []string{"seq"}
}

func rowKey(k tables.Kind, r pq.Row) string {
	if k == tables.Workareas {
		wa, _ := r[0].(string)
		return encodeWorkarea(wa)
	}
	if k == tables.Silver {
		a, _ := r[0].(string)
		v, _ := r[1].(int32)
		return encodeSilver(a, v)
	}
	s, _ := r[0].(int64)
	return encodeBronze(s)
}

func planRewrite(ctx context.Context, opts Options, w *rowWork) (*TablePlan, error) {
	key := w.key
	tp := &TablePlan{Tenant: key.Tenant, Table: string(key.Kind), Path: key.Path(), key: key, Action: ActionRewrite,
		Classes: w.classes, ReadVersion: -1, TxnVersion: -1, TargetTxnVersion: -1, RestoreVersion: -1, rows: w}
	st, err := store.Sub(opts.Lake, key.Path())
	if err != nil {
		return nil, err
	}
	dw, err := delta.OpenWriter(ctx, st, delta.Options{})
	if errors.Is(err, delta.ErrTableNotFound) {
		tp.Action = ActionRebuild
		tp.TargetTxnVersion = w.limit
		tp.Detail = fmt.Sprintf("the table is gone: create it and put back the %d row(s) the database says it holds at seq %d", len(w.keys), w.limit)
		return tp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s to plan its repair: %w", key, err)
	}
	snap := dw.Snapshot()
	tp.ReadVersion = snap.Version()
	if v, ok := snap.TxnVersion(tables.AppID); ok {
		tp.TxnVersion, tp.TargetTxnVersion = v, v
	}
	if w.catchUp {
		tp.TargetTxnVersion = w.limit
	}
	for _, f := range snap.Files() {
		p, _ := delta.DecodePath(f.Path)
		if w.files[f.Path] || w.files[p] {
			tp.removes = append(tp.removes, f)
			continue
		}
		if len(w.keys) == 0 {
			continue
		}
		hit := false
		err := snap.Scan(ctx, st, delta.ScanOptions{Columns: keyColumns(key.Kind), Files: []*delta.Add{f}}, func(_ *delta.Add, rows []pq.Row) error {
			for _, r := range rows {
				if w.keys[rowKey(key.Kind, r)] {
					hit = true
					return errStopScan
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return nil, fmt.Errorf("scan %s of %s: %w", f.Path, key, err)
		}
		if hit {
			tp.rewrite = append(tp.rewrite, f)
		}
	}
	tp.RemoveFiles = len(tp.removes) + len(tp.rewrite)
	tp.ReaddFiles = len(tp.rewrite)
	tp.Detail = fmt.Sprintf("%d key(s): remove every copy (rewrite %d file(s) without them), put back what the journal says at seq %d", len(w.keys), len(tp.rewrite), w.limit)
	if w.catchUp {
		tp.Detail = fmt.Sprintf("below its outbox prune mark at txn version %d: catch it up to %d from rows re-derived from the journal (%d key(s), %d file(s) rewritten), txn version %d",
			tp.TxnVersion, w.limit, len(w.keys), len(tp.rewrite), w.limit)
	}
	if len(tp.removes) > 0 {
		tp.Detail += fmt.Sprintf("; drop %d lost or unreadable file(s) from the log (their rows come back on the next pass)", len(tp.removes))
	}
	if w.breach > 0 {
		tp.Detail += fmt.Sprintf("; CONTAINMENT BREACH: %d never-promoted claim(s) — the replaced files keep their ciphertext until oml lake vacuum removes them (run oml lake vacuum --table silver --tenant %s after the retention, or sooner with a shorter --retention)", w.breach, key.Tenant)
		tp.Breach = w.breach
	}
	return tp, nil
}

var errStopScan = errors.New("stop scan")

// rebuildChunk bounds how many rows go into one data file a repair writes.
const rebuildChunk = 10_000

// expectedRows builds the rows key's table must hold for the affected keys
// at limit (lakewriter.TableRowsThrough: the one home for "rows of table T
// up to seq S, pruned or not"; rows `oml outbox prune` deleted are
// re-derived from the journal), in table order.
func expectedRows(ctx context.Context, pool *pgxpool.Pool, key tables.TableKey, keys map[string]bool, limit int64) ([]pq.Row, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	built, err := lakewriter.TableRowsThrough(ctx, pool, key, limit, selection(key, keys))
	if err != nil {
		return nil, fmt.Errorf("build the rows %s must hold: %w", key, err)
	}
	rows := make([]pq.Row, len(built))
	for i, r := range built {
		rows[i] = r.Row
	}
	return rows, nil
}

// writeExpected writes rows as data files of at most rebuildChunk rows.
func writeExpected(ctx context.Context, dw *delta.Writer, key tables.TableKey, rows []pq.Row) ([]*delta.Add, int64, error) {
	var adds []*delta.Add
	for start := 0; start < len(rows); start += rebuildChunk {
		add, err := dw.WriteFile(ctx, map[string]*string{}, rows[start:min(start+rebuildChunk, len(rows))])
		if err != nil {
			return nil, 0, fmt.Errorf("write the repaired rows of %s: %w", key, err)
		}
		adds = append(adds, add)
	}
	return adds, int64(len(rows)), nil
}

// applyRewrite carries out a row-level plan: archive and rewrite the files
// holding affected keys, drop lost files, add the journal's rows.
func applyRewrite(ctx context.Context, opts Options, planDigest string, tp *TablePlan) (TableResult, error) {
	res := TableResult{Path: tp.Path, Action: tp.Action, TxnVersion: tp.TargetTxnVersion}
	w := tp.rows
	want, err := expectedRows(ctx, opts.Pool, tp.key, w.keys, w.limit)
	if err != nil {
		return res, err
	}
	st, err := store.Sub(opts.Lake, tp.Path)
	if err != nil {
		return res, err
	}
	var dw *delta.Writer
	if tp.Action == ActionRebuild {
		dw, err = lakewriter.CreateTable(ctx, opts.Lake, tp.key)
	} else {
		dw, err = delta.OpenWriter(ctx, st, delta.Options{})
		if err == nil && dw.Version() != tp.ReadVersion {
			err = fmt.Errorf("%s changed while the repair was planned (version %d, planned at %d): re-run oml lake repair", tp.Path, dw.Version(), tp.ReadVersion)
		}
	}
	if err != nil {
		return res, err
	}
	if tp.Action == ActionRebuild {
		tp.ReadVersion = dw.Version()
	}
	snap := dw.Snapshot()
	// The archive holds every row of the affected keys the table had; the
	// rewritten files hold the rest of each file.
	var keepFiles []*delta.Add
	tp.removes = append(tp.removes, tp.rewrite...)
	kc, err := columnIndexes(snap, keyColumns(tp.key.Kind))
	if err != nil {
		return res, err
	}
	// Never write (or archive) an erased claim's body (erasure.go).
	if tp.erase, err = newEraser(tp.key, snap); err != nil {
		return res, err
	}
	built, err := newEraser(tp.key, nil)
	if err != nil {
		return res, err
	}
	built.scrub(want)
	arch, err := writeArchive(ctx, opts.Lake, st, snap, planDigest, tp, func(r pq.Row) bool {
		return w.keys[rowKey(tp.key.Kind, pq.Row{r[kc[0]], pickSecond(r, kc)})]
	}, func(kept []pq.Row) error {
		if len(kept) == 0 {
			return nil
		}
		tp.erase.scrub(kept)
		add, err := dw.WriteFile(ctx, map[string]*string{}, kept)
		if err != nil {
			return err
		}
		keepFiles = append(keepFiles, add)
		return nil
	})
	if err != nil {
		return res, err
	}
	res.RowsArchived, res.Archive = arch.Rows, arch.Manifest
	if err := opts.crash(AfterArchive, tp.Path); err != nil {
		return res, err
	}
	added, rebuilt, err := writeExpected(ctx, dw, tp.key, want)
	if err != nil {
		return res, err
	}
	adds := append(keepFiles, added...)
	c := delta.Commit{
		Operation:           Operation,
		OperationParameters: map[string]any{"action": tp.Action, "classes": classList(tp.Classes), "planDigest": planDigest},
		OperationMetrics: map[string]any{"numRemovedFiles": len(tp.removes), "numAddedFiles": len(adds),
			"numRemovedRows": arch.Rows, "numAddedRows": rebuilt},
		Adds: adds,
		Extra: map[string]any{"omlRepair": repairRecord{PlanDigest: planDigest, Action: tp.Action, Classes: tp.Classes,
			ReadVersion: tp.ReadVersion, RestoreVersion: -1, TxnVersion: tp.TargetTxnVersion, RowsRemoved: arch.Rows,
			RowsAdded: rebuilt, Archive: arch.Manifest}},
	}
	if (tp.Action == ActionRebuild || w.catchUp) && tp.TargetTxnVersion > 0 {
		c.Txn = &delta.Txn{AppID: tables.AppID, Version: tp.TargetTxnVersion}
	}
	v, err := commitRemoving(ctx, dw, tp, c)
	if err != nil {
		return res, err
	}
	res.DeltaVersion = v
	return res, nil
}

func pickSecond(r pq.Row, kc []int) any {
	if len(kc) < 2 {
		return nil
	}
	return r[kc[1]]
}

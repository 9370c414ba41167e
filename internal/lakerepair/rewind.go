package lakerepair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// lakeWriterTxn is the lake-writer txn version a commit sets, if any.
func lakeWriterTxn(h delta.HistoryEntry) (int64, bool) {
	for _, t := range h.Txns {
		if t.AppID == tables.AppID {
			return t.Version, true
		}
	}
	return 0, false
}

// omlBatch is the raw commitInfo.omlBatch of a commit (nil if none).
func omlBatch(ci json.RawMessage) json.RawMessage {
	var v struct {
		OmlBatch json.RawMessage `json:"omlBatch"`
	}
	if len(ci) == 0 || json.Unmarshal(ci, &v) != nil {
		return nil
	}
	return v.OmlBatch
}

// planRewind works out how to set key's table back to the newest version
// whose lake-writer txn version is at or below shared: the version just
// before the oldest commit (after it) that set the txn version above
// shared. Maintenance commits in between (optimize, checkpoint-free
// rewrites) are undone with the batches; a restore re-adds the files they
// compacted. If that version or one of its files is gone, the table is
// rebuilt instead.
func planRewind(ctx context.Context, lake store.Store, key tables.TableKey, shared int64) (*TablePlan, error) {
	st, err := store.Sub(lake, key.Path())
	if err != nil {
		return nil, err
	}
	w, err := delta.OpenWriter(ctx, st, delta.Options{})
	if err != nil {
		return nil, fmt.Errorf("open %s to plan its rewind: %w", key, err)
	}
	snap := w.Snapshot()
	tp := &TablePlan{Tenant: key.Tenant, Table: string(key.Kind), Path: key.Path(), key: key,
		Classes: map[string]int64{string(Diverged): 1}, ReadVersion: snap.Version(), TxnVersion: -1, RestoreVersion: -1}
	if v, ok := snap.TxnVersion(tables.AppID); ok {
		tp.TxnVersion = v
	}
	hist, err := delta.History(ctx, st, delta.HistoryOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", key, err)
	}
	restore, found := int64(-1), false
	for _, h := range hist { // newest first
		v, ok := lakeWriterTxn(h)
		if !ok {
			continue
		}
		if v > shared {
			restore = h.Version - 1
			continue
		}
		tp.TargetTxnVersion, tp.record, found = v, omlBatch(h.CommitInfo), true
		break
	}
	oldest := int64(0)
	if len(hist) > 0 {
		oldest = hist[len(hist)-1].Version
	}
	if restore < 0 && len(hist) > 0 && hist[len(hist)-1].Version == 0 && firstAbove(hist, shared) {
		// The table was created by the commit of its first batch (the lake
		// writer's version 0 holds its metadata and rows), and that batch
		// is already past the shared seq: no version of it holds only
		// shared rows, so it is emptied and rebuilt.
		return rebuildPlan(tp, snap, fmt.Sprintf("the first commit of %s is already past the shared seq %d", key, shared)), nil
	}
	if restore < 0 {
		return nil, fmt.Errorf("%s: no commit sets its txn version above the shared seq %d, yet the continuity check lists it; re-run oml lake status", key, shared)
	}
	if !found && oldest > 0 {
		// The log no longer reaches back far enough to know what the
		// table held at the shared seq.
		return rebuildPlan(tp, snap, fmt.Sprintf("the log of %s was cleaned up past the shared seq %d", key, shared)), nil
	}
	old, err := delta.Load(ctx, st, delta.AtVersion(restore))
	if errors.Is(err, delta.ErrVersionNotFound) {
		return rebuildPlan(tp, snap, fmt.Sprintf("version %d of %s is no longer in its log", restore, key)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("time travel to version %d of %s: %w", restore, key, err)
	}
	live := map[string]*delta.Add{}
	for _, a := range snap.Files() {
		live[a.Path] = a
	}
	keep := map[string]bool{}
	for _, a := range old.Files() {
		keep[a.Path] = true
		if _, ok := live[a.Path]; ok {
			continue
		}
		p, err := delta.DecodePath(a.Path)
		if err != nil {
			return nil, err
		}
		if _, err := st.Stat(ctx, p); errors.Is(err, store.ErrNotFound) {
			return rebuildPlan(tp, snap, fmt.Sprintf("data file %s of version %d of %s was vacuumed", p, restore, key)), nil
		} else if err != nil {
			return nil, fmt.Errorf("look for data file %s of %s: %w", p, key, err)
		}
		ra := *a
		ra.DataChange = true
		tp.readds = append(tp.readds, &ra)
	}
	for _, a := range snap.Files() {
		if !keep[a.Path] {
			tp.removes = append(tp.removes, a)
		}
	}
	sort.Slice(tp.removes, func(i, j int) bool { return tp.removes[i].Path < tp.removes[j].Path })
	sort.Slice(tp.readds, func(i, j int) bool { return tp.readds[i].Path < tp.readds[j].Path })
	tp.Action, tp.RestoreVersion, tp.restored = ActionRewind, restore, old
	tp.RemoveFiles, tp.ReaddFiles = len(tp.removes), len(tp.readds)
	tp.Detail = fmt.Sprintf("restore version %d (txn version %d, at or below the shared seq %d): remove %d file(s) added since, re-add %d removed since",
		restore, tp.TargetTxnVersion, shared, tp.RemoveFiles, tp.ReaddFiles)
	return tp, nil
}

// firstAbove reports whether the oldest commit of hist (newest first) sets
// the lake writer's txn version above shared.
func firstAbove(hist []delta.HistoryEntry, shared int64) bool {
	v, ok := lakeWriterTxn(hist[len(hist)-1])
	return ok && v > shared
}

// rebuildPlan empties the table (txn version 0): the drain's catch-up
// re-materializes every row the database holds for it.
func rebuildPlan(tp *TablePlan, snap *delta.Snapshot, why string) *TablePlan {
	tp.Action, tp.RestoreVersion, tp.TargetTxnVersion, tp.record = ActionRebuild, -1, 0, nil
	tp.removes = snap.Files()
	sort.Slice(tp.removes, func(i, j int) bool { return tp.removes[i].Path < tp.removes[j].Path })
	tp.readds = nil
	tp.RemoveFiles, tp.ReaddFiles = len(tp.removes), 0
	tp.Detail = why + ": remove every file (txn version 0); the next oml lake drain rebuilds the table from the database"
	return tp
}

// repairRecord is commitInfo.omlRepair of a repair commit: what the
// journal step reads back to name the commit in lake.repaired.
type repairRecord struct {
	PlanDigest     string           `json:"planDigest"`
	Action         string           `json:"action"`
	Classes        map[string]int64 `json:"classes"`
	ReadVersion    int64            `json:"readVersion"`
	RestoreVersion int64            `json:"restoreVersion"`
	TxnVersion     int64            `json:"txnVersion"`
	RowsRemoved    int64            `json:"rowsRemoved"`
	RowsAdded      int64            `json:"rowsAdded"`
	Archive        string           `json:"archive"`
}

func parseRepairRecord(ci json.RawMessage) (repairRecord, bool) {
	var v struct {
		OmlRepair *repairRecord `json:"omlRepair"`
	}
	if len(ci) == 0 || json.Unmarshal(ci, &v) != nil || v.OmlRepair == nil {
		return repairRecord{}, false
	}
	return *v.OmlRepair, true
}

// openPlanned opens a writer on tp's table and requires the table to be at
// the version the plan read: a table changed since is not repaired from a
// stale plan.
func openPlanned(ctx context.Context, opts Options, tp *TablePlan) (store.Store, *delta.Writer, error) {
	st, err := store.Sub(opts.Lake, tp.Path)
	if err != nil {
		return nil, nil, err
	}
	w, err := delta.OpenWriter(ctx, st, delta.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s to repair it: %w", tp.Path, err)
	}
	if w.Version() != tp.ReadVersion {
		return nil, nil, fmt.Errorf("%s changed while the repair was planned (version %d, planned at %d): re-run oml lake repair", tp.Path, w.Version(), tp.ReadVersion)
	}
	return st, w, nil
}

// apply archives what tp removes and commits it.
func apply(ctx context.Context, opts Options, planDigest string, tp *TablePlan) (TableResult, error) {
	res := TableResult{Path: tp.Path, Action: tp.Action, TxnVersion: tp.TargetTxnVersion}
	st, w, err := openPlanned(ctx, opts, tp)
	if err != nil {
		return res, err
	}
	seqCol, err := columnIndexes(w.Snapshot(), []string{tp.key.Kind.OutboxSeqColumn()})
	if err != nil {
		return res, err
	}
	if tp.erase, err = newEraser(tp.key, w.Snapshot()); err != nil {
		return res, err
	}
	arch, err := writeArchive(ctx, opts.Lake, st, w.Snapshot(), planDigest, tp, func(r pq.Row) bool {
		s, ok := r[seqCol[0]].(int64)
		return !ok || s > tp.TargetTxnVersion
	}, nil)
	if err != nil {
		return res, err
	}
	res.RowsArchived, res.Archive = arch.Rows, arch.Manifest
	if err := opts.crash(AfterArchive, tp.Path); err != nil {
		return res, err
	}
	// Files re-added from before an `oml lake maintain` may hold bodies
	// of claims erased since: never bring them back (erasure.go).
	nulled, err := scrubReadds(ctx, st, w, tp.restored, tp)
	if err != nil {
		return res, err
	}
	c := delta.Commit{
		Operation: Operation,
		OperationParameters: map[string]any{
			"action": tp.Action, "classes": classList(tp.Classes), "restoreVersion": tp.RestoreVersion, "planDigest": planDigest,
		},
		OperationMetrics: map[string]any{
			"numRemovedFiles": len(tp.removes), "numAddedFiles": len(tp.readds), "numRemovedRows": arch.Rows,
			"numErasedBodiesNulled": nulled,
		},
		Adds:      tp.readds,
		Txn:       &delta.Txn{AppID: tables.AppID, Version: tp.TargetTxnVersion},
		RewindTxn: true,
		Extra: map[string]any{"omlRepair": repairRecord{
			PlanDigest: planDigest, Action: tp.Action, Classes: tp.Classes, ReadVersion: tp.ReadVersion,
			RestoreVersion: tp.RestoreVersion, TxnVersion: tp.TargetTxnVersion, RowsRemoved: arch.Rows, Archive: arch.Manifest,
		}},
	}
	if len(tp.record) > 0 {
		// The batch record of the restored txn version: the continuity
		// check finds it by the txn version, and its anchor is in the
		// database (it is at or below the shared seq).
		c.Extra["omlBatch"] = tp.record
	}
	v, err := commitRemoving(ctx, w, tp, c)
	if err != nil {
		return res, err
	}
	res.DeltaVersion = v
	return res, nil
}

// commitRemoving adds a remove action for each of tp.removes to c and
// commits it: the last step of every repair action that drops files.
func commitRemoving(ctx context.Context, w *delta.Writer, tp *TablePlan, c delta.Commit) (int64, error) {
	for _, a := range tp.removes {
		p, err := delta.DecodePath(a.Path)
		if err != nil {
			return 0, err
		}
		rm, err := w.Remove(p)
		if err != nil {
			return 0, err
		}
		c.Removes = append(c.Removes, rm)
	}
	v, err := w.Commit(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("commit the repair of %s: %w (nothing of it is visible; re-run oml lake repair)", tp.Path, err)
	}
	return v, nil
}

func classList(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%s=%d", k, m[k])
	}
	return out
}

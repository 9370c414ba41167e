package delta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
)

// DefaultLogRetention is Delta's default delta.logRetentionDuration.
const DefaultLogRetention = 30 * 24 * time.Hour

// ErrRetentionTooShort refuses a vacuum whose retention is below the
// table's delta.deletedFileRetentionDuration (unless forced): files that
// readers of recent versions (or an in-flight writer) still need would go.
var ErrRetentionTooShort = errors.New("vacuum retention is shorter than the table's deleted-file retention")

// VacuumOptions configure Vacuum.
type VacuumOptions struct {
	// Retention keeps files removed (or written) less than this long ago;
	// 0 means the table's delta.deletedFileRetentionDuration (default 7 days).
	Retention time.Duration
	// Force allows a retention below the table's setting.
	Force bool
	// DryRun only lists what would be deleted.
	DryRun bool
	// Now is the clock (tests); zero means time.Now().
	Now time.Time
}

// VacuumResult lists the files vacuum deleted (or would delete).
type VacuumResult struct {
	Version   int64
	Retention time.Duration
	Cutoff    time.Time
	Deleted   []string // keys relative to the table root, sorted
	Bytes     int64
	DryRun    bool
	// StartVersion and EndVersion are the VACUUM START / VACUUM END commits
	// written around the deletions (-1: none, as in a dry run or when
	// nothing was to be deleted).
	StartVersion int64
	EndVersion   int64
}

// hiddenSegment is Spark's rule for what vacuum never touches: names that
// start with '_' or '.', except partition directories ("_2=x").
func hiddenSegment(seg string) bool {
	return (strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".")) && !strings.Contains(seg, "=")
}

// Vacuum deletes data files that no version inside the retention window
// references: files that are neither live nor named by an unexpired
// tombstone, and that are older than the retention (so files of a commit
// still being written are never touched). It never touches _delta_log/ or
// other hidden paths.
func Vacuum(ctx context.Context, st store.Store, opts VacuumOptions) (VacuumResult, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	// OpenWriter loads the snapshot and runs the writer gate; the writer is
	// used only for the VACUUM START/END commits.
	w, err := OpenWriter(ctx, st, Options{Now: func() time.Time { return now }})
	if err != nil {
		return VacuumResult{}, err
	}
	snap := w.Snapshot()
	tableRetention, err := snap.DeletedFileRetention()
	if err != nil {
		return VacuumResult{}, err
	}
	retention := opts.Retention
	if retention == 0 {
		retention = tableRetention
	}
	if retention < tableRetention && !opts.Force {
		return VacuumResult{}, fmt.Errorf("%w: table %s: asked for %s, the table keeps removed files for %s (delta.deletedFileRetentionDuration); use a longer retention or force it if no reader or writer can still need those files",
			ErrRetentionTooShort, snap.table, retention, tableRetention)
	}
	cutoff := now.Add(-retention)
	res := VacuumResult{Version: snap.version, Retention: retention, Cutoff: cutoff, DryRun: opts.DryRun, StartVersion: -1, EndVersion: -1}
	keep := make(map[string]bool, len(snap.files)+len(snap.tombstones))
	for k := range snap.files {
		keep[k] = true
	}
	for k, r := range snap.tombstones {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp > cutoff.UnixMilli() {
			keep[k] = true
		}
	}
	objs, err := st.List(ctx, "", "")
	if err != nil {
		return res, fmt.Errorf("table %s: listing files: %w", snap.table, err)
	}
	var cands []store.ObjectInfo
	for _, o := range objs {
		hidden := false
		for _, seg := range strings.Split(o.Key, "/") {
			if hiddenSegment(seg) {
				hidden = true
				break
			}
		}
		if hidden || keep[o.Key] || !o.ModTime.Before(cutoff) {
			continue
		}
		cands = append(cands, o)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Key < cands[j].Key })
	if opts.DryRun || len(cands) == 0 {
		for _, o := range cands {
			res.Deleted = append(res.Deleted, o.Key)
			res.Bytes += o.Size
		}
		return res, nil
	}
	var size int64
	for _, o := range cands {
		size += o.Size
	}
	// Like Spark, record the vacuum in the log: a VACUUM START commit before
	// the first deletion and a VACUUM END commit after the last. Both hold
	// only a commitInfo (no file, no txn, no data change), so readers that
	// look for batch records or txn versions pass over them.
	var specified any // null: the table's retention was used
	if opts.Retention != 0 {
		specified = opts.Retention.Milliseconds()
	}
	res.StartVersion, err = commitInfoOnly(ctx, w, Commit{Operation: "VACUUM START",
		OperationParameters: map[string]any{
			"retentionCheckEnabled":    !opts.Force,
			"specifiedRetentionMillis": specified,
			"defaultRetentionMillis":   tableRetention.Milliseconds(),
		},
		OperationMetrics: map[string]any{"numFilesToDelete": len(cands), "sizeOfDataToDelete": size},
	})
	if err != nil {
		return res, fmt.Errorf("table %s: recording VACUUM START: %w", snap.table, err)
	}
	var delErr error
	for _, o := range cands {
		if err := st.Delete(ctx, o.Key); err != nil {
			delErr = fmt.Errorf("table %s: deleting %s: %w", snap.table, o.Key, err)
			break
		}
		res.Deleted = append(res.Deleted, o.Key)
		res.Bytes += o.Size
	}
	status := "COMPLETED"
	if delErr != nil {
		status = "FAILED" // Spark's spelling for a vacuum that stopped part way
	}
	// numVacuumedDirectories: oml deletes objects only; a directory is not an
	// object in a store, so none is ever vacuumed.
	res.EndVersion, err = commitInfoOnly(ctx, w, Commit{Operation: "VACUUM END",
		OperationParameters: map[string]any{"status": status},
		OperationMetrics:    map[string]any{"numDeletedFiles": len(res.Deleted), "numVacuumedDirectories": 0},
	})
	if delErr != nil {
		return res, delErr
	}
	if err != nil {
		return res, fmt.Errorf("table %s: %d file(s) were deleted but recording VACUUM END failed: %w", snap.table, len(res.Deleted), err)
	}
	return res, nil
}

// vacuumCommitAttempts bounds how often a VACUUM START/END commit is retried
// after losing its version to another writer (it conflicts with nothing).
const vacuumCommitAttempts = 10

// commitInfoOnly commits c (no files, no txn), retrying at the next version
// when another writer took this one.
func commitInfoOnly(ctx context.Context, w *Writer, c Commit) (int64, error) {
	var err error
	for i := 0; i < vacuumCommitAttempts; i++ {
		var v int64
		if v, err = w.Commit(ctx, c); err == nil {
			return v, nil
		}
		if !errors.Is(err, ErrConflict) {
			return -1, err
		}
	}
	return -1, err
}

// CleanupResult lists the log files cleanup deleted.
type CleanupResult struct {
	// KeptCheckpoint is the checkpoint everything older was deleted behind
	// (-1: nothing could be deleted).
	KeptCheckpoint int64
	Deleted        []string
}

// CleanupLog deletes log entries older than the log retention
// (delta.logRetentionDuration, default 30 days), but only behind a
// retained checkpoint: it finds the newest complete checkpoint whose commit
// is older than the cutoff and deletes the commits, checkpoints and
// checksum files of earlier versions. That checkpoint, its commit and
// everything after it stay, so every reader still finds a full snapshot.
func CleanupLog(ctx context.Context, st store.Store, now time.Time) (CleanupResult, error) {
	res := CleanupResult{KeptCheckpoint: -1}
	snap, err := Load(ctx, st)
	if err != nil {
		return res, err
	}
	if err := checkWrite(snap.table, snap.protocol, &snap.metadata, snap.schema); err != nil {
		return res, err
	}
	retention := DefaultLogRetention
	if v, ok := snap.metadata.Configuration["delta.logRetentionDuration"]; ok {
		if retention, err = ParseInterval(v); err != nil {
			return res, fmt.Errorf("table %s: %w", snap.table, err)
		}
	}
	cutoff := now.Add(-retention)
	l, err := listLog(ctx, st, 0)
	if err != nil {
		return res, err
	}
	var keep *checkpointRef
	for v, cp := range l.checkpoints {
		if cp.v2 {
			continue
		}
		c, ok := l.commits[v]
		if !ok || !c.modTime.Before(cutoff) {
			continue
		}
		if keep == nil || v > keep.version {
			keep = cp
		}
	}
	if keep == nil {
		return res, nil
	}
	res.KeptCheckpoint = keep.version
	objs, err := st.List(ctx, LogDir, "")
	if err != nil {
		return res, err
	}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, LogDir)
		if strings.Contains(name, "/") {
			continue
		}
		// Versioned names: NNN.json, NNN.checkpoint*.parquet, NNN.crc and
		// Hadoop's .NNN.json.crc side files.
		base := strings.TrimPrefix(name, ".")
		if len(base) < 21 || base[20] != '.' || !isDigits(base[:20]) {
			continue
		}
		lf := parseLogFile(LogDir+base[:20]+".json", 0)
		if lf.kind != kindCommit || lf.version >= keep.version {
			continue
		}
		if err := st.Delete(ctx, o.Key); err != nil {
			return res, fmt.Errorf("table %s: deleting %s: %w", snap.table, o.Key, err)
		}
		res.Deleted = append(res.Deleted, o.Key)
	}
	return res, nil
}

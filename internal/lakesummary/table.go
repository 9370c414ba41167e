package lakesummary

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
)

// Table is what doctor and lake status know of one tenant table after a
// run: read from its log now, or kept from an earlier read whose log (and,
// for bronze, whose head's data files) are provably unchanged.
type Table struct {
	Key tables.TableKey
	// Exists: the table has a log (readable or not).
	Exists bool
	// Version and CheckpointVersion (-1: none) of the table's snapshot.
	Version, CheckpointVersion int64
	// Files are the live data files; SmallFiles those under
	// Options.SmallFileSize.
	Files, SmallFiles int
	// TombstonedBytes are the bytes of removed files still in the log;
	// VacuumDueBytes those past Retention at Options.Now.
	TombstonedBytes, VacuumDueBytes int64
	// Retention is the table's deleted-file retention (the default when
	// its property cannot be read).
	Retention time.Duration
	// Position is the table's lake-writer position, as LakePositions reads
	// it (TxnVersion 0: none).
	Position lakewriter.TablePosition
	// Err is what LakePositions fails with for this table (nil for a table
	// that does not exist); LoadErr is the log's own read error; NoStore
	// says the key has no table store at all (LoadErr then says why).
	Err, LoadErr error
	NoStore      bool
	// Bronze is the bronze table's newest event (bronze tables only).
	Bronze *Head
	// FromSummary: kept from an earlier read, not read now.
	FromSummary bool

	// What the summary keeps beyond the above (see entry).
	datedBytes, datedMin, datedMax int64
	smallSize                      int64
}

// CommitsSinceCheckpoint is how many commits a reader replays past the
// newest checkpoint (every commit when there is none).
func (t *Table) CommitsSinceCheckpoint() int64 {
	if t.CheckpointVersion < 0 {
		return t.Version + 1
	}
	return t.Version - t.CheckpointVersion
}

// Head is bronze's newest event as bronze.HeadOf returns it; Reread marks
// a table whose log could not be read (the fork check then reads it
// itself, so its problem reads exactly as it always did).
type Head struct {
	Head   bronze.Head
	OK     bool
	Err    error
	Reread bool
	files  []string // the data files read for it, relative to the table
}

// readFull reads one table in full at the run's time at, as doctor always
// has (lakewriter's ReadTable, then bronze's head), and returns what the
// checks need with the summary entry that proves it later (nil: not
// kept, e.g. a table that cannot be read is read again by every run).
func readFull(ctx context.Context, lake store.Store, key tables.TableKey, opts *Options, at time.Time) (Table, *entry) {
	// The log is listed before it is read: a commit landing in between
	// makes the listing older than the read, which the next run sees as
	// a changed log (read again), never the other way round.
	var listing []store.ObjectInfo
	var listErr error
	if !opts.Write || opts.Off { // no entry is stored: read as before, no listing
		tr := lakewriter.ReadTable(ctx, lake, key)
		return FromRead(ctx, &tr, opts.SmallFileSize, at, !opts.NoHead), nil
	}
	if st, err := key.Store(lake); err == nil {
		listing, listErr = st.List(ctx, delta.LogDir, "")
	}
	tr := lakewriter.ReadTable(ctx, lake, key)
	t := FromRead(ctx, &tr, opts.SmallFileSize, at, !opts.NoHead)
	if listErr != nil || t.LoadErr != nil || t.Err != nil || (t.Bronze != nil && t.Bronze.Err != nil) {
		return t, nil
	}
	if opts.NoHead && key.Kind == tables.Bronze {
		return t, nil // an entry without its head would serve no doctor run
	}
	// A table whose txn version came from a checkpoint (oml lake maintain
	// checkpointed it after the writer's commit) has no record in its
	// snapshot: CheckContinuity would read its log's last commits for it on
	// every run (a third of doctor's CPU at 8,000 tables after a maintain).
	// The commit that set a txn version never changes, so it is looked up
	// once here and kept with the entry.
	if _, _, known := t.Position.Record(); !known && t.Position.TxnVersion > 0 {
		p, err := lakewriter.ResolveRecord(ctx, lake, t.Position)
		if err != nil {
			return t, nil
		}
		t.Position = p
	}
	e := &entry{key: key, fullReadAt: at, start: startOf(t), t: t}
	log := since(listing, e.start)
	if t.Exists && newestCommit(log) != t.Version {
		return t, nil // the log moved on between the listing and the read
	}
	if !t.Exists && len(log) > 0 {
		return t, nil
	}
	var files []store.ObjectInfo
	if t.Bronze != nil {
		for _, k := range t.Bronze.files {
			info, err := tr.Store.Stat(ctx, k)
			if err != nil {
				return t, nil
			}
			files = append(files, info)
		}
	}
	e.files = t.Bronze.fileKeys()
	e.fp = fingerprint(log, files)
	return t, e
}

// FromRead is what the checks need of a table read already; with head,
// a bronze table's newest event is read too (doctor's own read while the
// database is down needs no head).
func FromRead(ctx context.Context, tr *lakewriter.TableRead, smallFileSize int64, now time.Time, head bool) Table {
	t := Table{Key: tr.Key, Version: -1, CheckpointVersion: -1, Err: tr.Err, LoadErr: tr.LoadErr, smallSize: smallFileSize}
	t.Exists = tr.Exists()
	t.NoStore = tr.Store == nil && tr.LoadErr != nil
	snap := tr.Snap
	if snap != nil {
		t.Position = tr.Position()
		t.Version, t.CheckpointVersion, t.Files = snap.Version(), snap.CheckpointVersion(), snap.NumFiles()
		for _, a := range snap.Files() {
			if a.Size < smallFileSize {
				t.SmallFiles++
			}
		}
		retention, err := snap.DeletedFileRetention()
		if err != nil {
			retention = delta.DefaultDeletedFileRetention
		}
		t.Retention = retention
		cutoff := now.Add(-retention).UnixMilli()
		for _, rm := range snap.Tombstones() {
			if rm.Size == nil {
				continue
			}
			t.TombstonedBytes += *rm.Size
			if rm.DeletionTimestamp == nil {
				continue
			}
			ts := *rm.DeletionTimestamp
			if ts < cutoff {
				t.VacuumDueBytes += *rm.Size
			}
			if t.datedBytes == 0 || ts < t.datedMin {
				t.datedMin = ts
			}
			if t.datedBytes == 0 || ts > t.datedMax {
				t.datedMax = ts
			}
			t.datedBytes += *rm.Size
		}
	}
	if !head || tr.Key.Kind != tables.Bronze {
		return t
	}
	switch {
	case snap != nil:
		h := &Head{}
		var files []*delta.Add
		h.Head, h.OK, files, h.Err = bronze.HeadOfFiles(ctx, snap, tr.Store, tr.Key.Tenant)
		for _, f := range files {
			if k, err := delta.DecodePath(f.Path); err == nil {
				h.files = append(h.files, k)
			} else if h.Err == nil {
				h.Err = err
			}
		}
		t.Bronze = h
	case t.Exists:
		t.Bronze = &Head{Reread: true}
	default:
		t.Bronze = &Head{}
	}
	return t
}

// fileKeys are the data files read for the head (relative to the table).
func (h *Head) fileKeys() []string {
	if h == nil {
		return nil
	}
	return h.files
}

// startOf is the first log version whose files the entry's fingerprint
// covers: the newest checkpoint (what a reader starts from), or 0.
func startOf(t Table) int64 { return max(t.CheckpointVersion, 0) }

// since keeps the listed log files of version start on (and the
// _last_checkpoint hint), as List(LogDir, startAfter(start)) returns them.
func since(listing []store.ObjectInfo, start int64) []store.ObjectInfo {
	after := startAfter(start)
	out := listing[:0:0]
	for _, o := range listing {
		if o.Key > after {
			out = append(out, o)
		}
	}
	return out
}

// newestCommit is the highest commit version in a log listing (-1: none).
func newestCommit(log []store.ObjectInfo) int64 {
	v := int64(-1)
	for _, o := range log {
		if n, ok := commitVersion(o.Key); ok && n > v {
			v = n
		}
	}
	return v
}

// commitVersion parses a commit file's key (_delta_log/%020d.json).
func commitVersion(key string) (int64, bool) {
	name, ok := strings.CutPrefix(key, delta.LogDir)
	if !ok || len(name) != 25 || !strings.HasSuffix(name, ".json") {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	return v, err == nil && v >= 0
}

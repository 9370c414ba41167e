package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// DefaultDeletedFileRetention is Delta's default for
// delta.deletedFileRetentionDuration: tombstones (and the files they name)
// are kept this long.
const DefaultDeletedFileRetention = 7 * 24 * time.Hour

// DefaultCheckpointInterval is the number of commits between checkpoints
// when neither the writer options nor delta.checkpointInterval say.
const DefaultCheckpointInterval = 100

// checkpointBatchRows is how many actions are handed to the Parquet writer
// at once: memory stays flat however many files the table has.
const checkpointBatchRows = 4096

// ParseInterval parses a Delta/Spark interval string such as
// "interval 7 days", "interval 1 weeks", "168 hours" or "interval 2 days 4 hours".
func ParseInterval(s string) (time.Duration, error) {
	fields := strings.Fields(strings.ToLower(strings.TrimSpace(s)))
	if len(fields) > 0 && fields[0] == "interval" {
		fields = fields[1:]
	}
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, fmt.Errorf("delta: %q is not an interval like \"interval 7 days\"", s)
	}
	var total time.Duration
	for i := 0; i < len(fields); i += 2 {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("delta: %q is not an interval like \"interval 7 days\"", s)
		}
		unit := strings.TrimSuffix(fields[i+1], "s")
		var d time.Duration
		switch unit {
		case "week":
			d = 7 * 24 * time.Hour
		case "day":
			d = 24 * time.Hour
		case "hour":
			d = time.Hour
		case "minute":
			d = time.Minute
		case "second":
			d = time.Second
		case "millisecond":
			d = time.Millisecond
		case "microsecond":
			d = time.Microsecond
		default:
			return 0, fmt.Errorf("delta: interval %q has unit %q; use weeks, days, hours, minutes or seconds", s, fields[i+1])
		}
		total += time.Duration(n) * d
	}
	return total, nil
}

// DeletedFileRetention is the table's delta.deletedFileRetentionDuration.
func (s *Snapshot) DeletedFileRetention() (time.Duration, error) {
	v, ok := s.metadata.Configuration["delta.deletedFileRetentionDuration"]
	if !ok {
		return DefaultDeletedFileRetention, nil
	}
	return ParseInterval(v)
}

// CheckpointResult describes a written checkpoint.
type CheckpointResult struct {
	Version      int64
	Actions      int64 // rows in the checkpoint
	SizeInBytes  int64
	AddFiles     int64
	Tombstones   int64 // unexpired removes kept
	Txns         int64
	ExpiredFiles int64 // removes dropped because they expired
}

// checkpoint Parquet schema: one nullable struct column per action kind,
// every member nullable (P§Checkpoint Schema).
var (
	strMap        = pq.MapOf(pq.String, pq.String, true)
	checkpointTxn = pq.StructOf(
		pq.Nullable("appId", pq.String), pq.Nullable("version", pq.Int64), pq.Nullable("lastUpdated", pq.Int64))
	checkpointAdd = pq.StructOf(
		pq.Nullable("path", pq.String), pq.Nullable("partitionValues", strMap), pq.Nullable("size", pq.Int64),
		pq.Nullable("modificationTime", pq.Int64), pq.Nullable("dataChange", pq.Boolean),
		pq.Nullable("stats", pq.String), pq.Nullable("tags", strMap))
	checkpointRemove = pq.StructOf(
		pq.Nullable("path", pq.String), pq.Nullable("deletionTimestamp", pq.Int64), pq.Nullable("dataChange", pq.Boolean),
		pq.Nullable("extendedFileMetadata", pq.Boolean), pq.Nullable("partitionValues", strMap), pq.Nullable("size", pq.Int64))
	checkpointMetaData = pq.StructOf(
		pq.Nullable("id", pq.String), pq.Nullable("name", pq.String), pq.Nullable("description", pq.String),
		pq.Nullable("format", pq.StructOf(pq.Nullable("provider", pq.String), pq.Nullable("options", strMap))),
		pq.Nullable("schemaString", pq.String), pq.Nullable("partitionColumns", pq.ListOf(pq.String, true)),
		pq.Nullable("configuration", strMap), pq.Nullable("createdTime", pq.Int64))
	checkpointProtocol = pq.StructOf(
		pq.Nullable("minReaderVersion", pq.Int32), pq.Nullable("minWriterVersion", pq.Int32),
		pq.Nullable("readerFeatures", pq.ListOf(pq.String, true)), pq.Nullable("writerFeatures", pq.ListOf(pq.String, true)))
	checkpointSchema = pq.NewSchema(
		pq.Nullable("txn", checkpointTxn), pq.Nullable("add", checkpointAdd), pq.Nullable("remove", checkpointRemove),
		pq.Nullable("metaData", checkpointMetaData), pq.Nullable("protocol", checkpointProtocol))
)

func pvEntries(m map[string]*string) []pq.MapEntry {
	if m == nil {
		return nil
	}
	out := make([]pq.MapEntry, 0, len(m))
	for _, k := range sortedKeys(m) {
		var v any
		if m[k] != nil {
			v = *m[k]
		}
		out = append(out, pq.MapEntry{Key: k, Value: v})
	}
	return out
}

func strEntries(m map[string]string) []pq.MapEntry {
	if m == nil {
		return nil
	}
	out := make([]pq.MapEntry, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, pq.MapEntry{Key: k, Value: m[k]})
	}
	return out
}

func optStr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func optInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func optBool(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func strList(ss []string) any {
	if ss == nil {
		return nil
	}
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func emptyStrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// WriteCheckpoint writes the classic single-file checkpoint of snap (at
// snap's version) and then _last_checkpoint. The checkpoint holds the
// protocol, the metadata, every live add, every unexpired remove and every
// txn (with lastUpdated); it is streamed to the store in row batches, and
// _last_checkpoint is written only after the checkpoint file is complete.
func WriteCheckpoint(ctx context.Context, st store.Store, snap *Snapshot, now time.Time) (CheckpointResult, error) {
	res := CheckpointResult{Version: snap.version}
	if snap.version < 0 {
		return res, errors.New("delta: cannot checkpoint a table with no commits")
	}
	// A checkpoint is a write: it must carry everything the table's
	// features put in the log (domain metadata, row tracking, ...), which
	// only tables that pass the writer gate guarantee.
	if err := checkWrite(snap.table, snap.protocol, &snap.metadata, snap.schema); err != nil {
		return res, err
	}
	retention, err := snap.DeletedFileRetention()
	if err != nil {
		return res, fmt.Errorf("table %s: %w", snap.table, err)
	}
	cutoff := now.Add(-retention).UnixMilli()

	var meta pq.FileMeta
	err = putStream(ctx, st, CheckpointKey(snap.version), putNow, func(w io.Writer) error {
		var werr error
		meta, werr = writeCheckpointRows(ctx, st, w, snap, cutoff, &res)
		return werr
	})
	if err != nil {
		return res, fmt.Errorf("table %s: writing the checkpoint of version %d: %w", snap.table, snap.version, err)
	}
	res.SizeInBytes = meta.Size
	// The hint never moves backwards (an older checkpoint written late, or
	// a concurrent checkpointer that got further).
	if cur, ok, err := readLastCheckpoint(ctx, st); err == nil && ok && cur.Version > snap.version {
		return res, nil
	}
	hint, err := json.Marshal(lastCheckpointHint{Version: snap.version, Size: res.Actions, SizeInBytes: res.SizeInBytes, NumOfAddFiles: res.AddFiles})
	if err != nil {
		return res, err
	}
	if err := st.Put(ctx, LastCheckpointKey, strings.NewReader(string(hint)), int64(len(hint))); err != nil {
		// The checkpoint itself is complete and will be found by listing.
		return res, fmt.Errorf("table %s: writing %s (the checkpoint of version %d is complete): %w: %w", snap.table, LastCheckpointKey, snap.version, errHintOnly, err)
	}
	return res, nil
}

func writeCheckpointRows(ctx context.Context, st store.Store, w io.Writer, snap *Snapshot, cutoff int64, res *CheckpointResult) (pq.FileMeta, error) {
	pw, err := pq.NewWriter(w, checkpointSchema, pq.Options{RowGroupRows: 32 << 10, RowGroupBytes: 8 << 20})
	if err != nil {
		return pq.FileMeta{}, err
	}
	batch := make([]pq.Row, 0, checkpointBatchRows)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := pw.Write(batch); err != nil {
			return err
		}
		res.Actions += int64(len(batch))
		clear(batch)
		batch = batch[:0]
		return nil
	}
	emit := func(r pq.Row) error {
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	}
	p := snap.protocol
	if err := emit(pq.Row{nil, nil, nil, nil, []any{int32(p.MinReaderVersion), int32(p.MinWriterVersion), strList(p.ReaderFeatures), strList(p.WriterFeatures)}}); err != nil {
		return pq.FileMeta{}, err
	}
	md := snap.metadata
	var created any
	if md.CreatedTime != nil {
		created = *md.CreatedTime
	}
	if err := emit(pq.Row{nil, nil, nil, []any{md.ID, optStr(md.Name), optStr(md.Description),
		[]any{md.Format.Provider, strEntries(orEmptyStr(md.Format.Options))}, md.SchemaString,
		strList(orEmptyList(md.PartitionColumns)), strEntries(orEmptyStr(md.Configuration)), created}, nil}); err != nil {
		return pq.FileMeta{}, err
	}
	for _, t := range snap.txns.sorted() {
		if err := emit(pq.Row{[]any{t.AppID, t.Version, optInt(t.LastUpdated)}, nil, nil, nil, nil}); err != nil {
			return pq.FileMeta{}, err
		}
		res.Txns++
	}
	emitAdd := func(a *Add) error {
		var tags any
		if a.Tags != nil {
			tags = pvEntries(a.Tags)
		}
		if err := emit(pq.Row{nil, []any{a.Path, pvEntries(orEmptyPV(a.PartitionValues)), a.Size, a.ModificationTime, a.DataChange, emptyStrNil(a.Stats), tags}, nil, nil, nil}); err != nil {
			return err
		}
		res.AddFiles++
		return nil
	}
	emitRemove := func(r *Remove) error {
		var ts int64
		if r.DeletionTimestamp != nil {
			ts = *r.DeletionTimestamp
		}
		if ts <= cutoff {
			res.ExpiredFiles++
			return nil
		}
		var pv any
		if r.PartitionValues != nil {
			pv = pvEntries(r.PartitionValues)
		} else if r.ExtendedFileMetadata != nil && *r.ExtendedFileMetadata {
			pv = pvEntries(orEmptyPV(nil)) // extendedFileMetadata promises partitionValues: {} when none were given
		}
		if err := emit(pq.Row{nil, nil, []any{r.Path, optInt(r.DeletionTimestamp), r.DataChange, optBool(r.ExtendedFileMetadata), pv, optInt(r.Size)}, nil, nil}); err != nil {
			return err
		}
		res.Tombstones++
		return nil
	}
	if snap.hasLeanBase() {
		// Stream the base's files and tombstones through what changed
		// since: a base file removed or re-added since, or a base
		// tombstone superseded since, is left to the in-memory maps.
		err := snap.eachBaseAction(ctx, st, func(a *Action) error {
			switch {
			case a.Add != nil:
				key, err := DecodePath(a.Add.Path)
				if err != nil {
					return err
				}
				if _, again := snap.files[key]; again || snap.leanRemoved[key] {
					return nil
				}
				return emitAdd(a.Add)
			case a.Remove != nil:
				key, err := DecodePath(a.Remove.Path)
				if err != nil {
					return err
				}
				if _, again := snap.files[key]; again {
					return nil
				}
				if _, newer := snap.tombstones[key]; newer {
					return nil
				}
				return emitRemove(a.Remove)
			}
			return nil
		})
		if err != nil {
			return pq.FileMeta{}, fmt.Errorf("streaming the base of version %d: %w", snap.leanTail, err)
		}
	}
	for _, a := range snap.files {
		if err := emitAdd(a); err != nil {
			return pq.FileMeta{}, err
		}
	}
	for _, r := range snap.tombstones {
		if err := emitRemove(r); err != nil {
			return pq.FileMeta{}, err
		}
	}
	if err := flush(); err != nil {
		return pq.FileMeta{}, err
	}
	return pw.Close()
}

func orEmptyStr(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmptyPV(m map[string]*string) map[string]*string {
	if m == nil {
		return map[string]*string{}
	}
	return m
}

func orEmptyList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkpointInterval is the auto-checkpoint policy's N.
func (w *Writer) checkpointInterval() int64 {
	if w.opts.CheckpointInterval > 0 {
		return int64(w.opts.CheckpointInterval)
	}
	if v, ok := w.snap.metadata.Configuration["delta.checkpointInterval"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return DefaultCheckpointInterval
}

// CommitsSinceCheckpoint is the number of commits after the newest
// checkpoint this writer knows of (the one it loaded or wrote).
func (w *Writer) CommitsSinceCheckpoint() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap.version - w.snap.checkpointVersion
}

// CheckpointDue reports whether N commits were made since the last
// checkpoint. The policy counts commits since the last checkpoint rather
// than testing version % N, so a crash between a commit and its checkpoint
// only delays the checkpoint to the next commit instead of skipping it.
func (w *Writer) CheckpointDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap.version-w.snap.checkpointVersion >= w.checkpointInterval()
}

// Checkpoint writes a checkpoint of the writer's current version.
func (w *Writer) Checkpoint(ctx context.Context) (CheckpointResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return CheckpointResult{}, w.broken
	}
	if w.snap.tombsPartial {
		if err := w.completeTombstones(ctx); err != nil {
			return CheckpointResult{}, err
		}
	}
	now := w.opts.now()
	res, err := WriteCheckpoint(ctx, w.st, w.snap, now)
	if err == nil || errors.Is(err, errHintOnly) {
		w.snap.checkpointVersion = w.snap.version
		w.snap.dropExpiredTombstones(now)
		if w.snap.lean {
			w.snap.rebaseLean(res.AddFiles)
		}
	}
	if errors.Is(err, store.ErrNotFound) && w.snap.hasLeanBase() {
		// Part of the lean base is gone from the log (cleaned up behind a
		// newer checkpoint, or the table was deleted): this snapshot can
		// never be checkpointed again, so the writer is reopened from the
		// log (the lake writer does that on ErrWriterBroken).
		w.broken = fmt.Errorf("%w: table %s: the base of version %d is no longer in the log: %v", ErrWriterBroken, w.table, w.snap.leanTail, err)
	}
	return res, err
}

// completeTombstones takes the tombstones of a snapshot rebuilt from a
// TableState (which keeps none) from a load of the log at its version:
// the writer's snapshot is the log at that version, so the load's removes
// are the snapshot's, those made since the rebuild included.
func (w *Writer) completeTombstones(ctx context.Context) error {
	all, err := Load(ctx, w.st, AtVersion(w.snap.version))
	if err != nil {
		return fmt.Errorf("delta: table %s: reading its tombstones for a checkpoint at version %d: %w", w.table, w.snap.version, err)
	}
	w.snap.tombstones, w.snap.tombsPartial = all.tombstones, false
	return nil
}

// dropExpiredTombstones forgets the removes a checkpoint written now would
// drop, so a long-running writer's memory does not grow with every remove
// it ever made, and its snapshot stays equal to a reload from that
// checkpoint. The map is rebuilt because Go maps never shrink.
func (s *Snapshot) dropExpiredTombstones(now time.Time) {
	retention, err := s.DeletedFileRetention()
	if err != nil {
		return
	}
	cutoff := now.Add(-retention).UnixMilli()
	kept := make(map[string]*Remove, len(s.tombstones))
	for k, r := range s.tombstones {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp > cutoff {
			kept[k] = r
		}
	}
	s.tombstones = kept
}

var errHintOnly = errors.New("only the checkpoint hint failed")

// MaybeCheckpoint writes a checkpoint if CheckpointDue.
func (w *Writer) MaybeCheckpoint(ctx context.Context) (bool, CheckpointResult, error) {
	if !w.CheckpointDue() {
		return false, CheckpointResult{}, nil
	}
	res, err := w.Checkpoint(ctx)
	return err == nil, res, err
}

// Checkpoint loads the latest snapshot of the table at st and checkpoints it.
func Checkpoint(ctx context.Context, st store.Store) (CheckpointResult, error) {
	snap, err := Load(ctx, st)
	if err != nil {
		return CheckpointResult{}, err
	}
	return WriteCheckpoint(ctx, st, snap, time.Now())
}

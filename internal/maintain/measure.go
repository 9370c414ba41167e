package maintain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Measurements are what the policy decides from, for one table. All of
// them come from the Delta log (one snapshot load and one listing of
// _delta_log/); no data file is read.
type Measurements struct {
	Table  string `json:"table"`
	Kind   string `json:"kind"`
	Exists bool   `json:"exists"`

	Version                int64 `json:"version"`
	CheckpointVersion      int64 `json:"checkpoint_version"` // -1: none
	CommitsSinceCheckpoint int64 `json:"commits_since_checkpoint"`
	CheckpointInterval     int64 `json:"checkpoint_interval"`

	LiveFiles  int   `json:"live_files"`
	LiveBytes  int64 `json:"live_bytes"`
	SmallFiles int   `json:"small_files"` // live files below the target size
	SmallBytes int64 `json:"small_bytes"`

	Tombstones        int           `json:"tombstones"`
	TombstonedBytes   int64         `json:"tombstoned_bytes"`
	ExpiredTombstones int           `json:"expired_tombstones"` // removed longer ago than the retention: vacuum may delete them
	ExpiredBytes      int64         `json:"expired_bytes"`
	Retention         time.Duration `json:"-"`
	RetentionSeconds  float64       `json:"retention_seconds"` // JSON durations are float seconds (docs/cli.md)
	// NextExpiry is when the oldest unexpired tombstone expires (zero: none).
	NextExpiry time.Time `json:"next_expiry,omitzero"`

	// ErasedBodyFiles counts live files whose stats say they may hold a row
	// with state erased and a non-null body (silver only): erasure work.
	ErasedBodyFiles int `json:"erased_body_files"`
	// ErasedTombstones counts tombstones that may hold such a body;
	// ErasedTombstonesExpired those vacuum may already delete.
	ErasedTombstones        int `json:"erased_tombstones"`
	ErasedTombstonesExpired int `json:"erased_tombstones_expired"`

	// LogCleanable is how many commits log cleanup could delete now (older
	// than delta.logRetentionDuration and behind a retained checkpoint).
	LogCleanable int `json:"log_cleanable"`
}

// MeasureOptions say what counts as small and what time it is.
type MeasureOptions struct {
	TargetSize int64     // files below it are small (default 128 MiB)
	Now        time.Time // zero: time.Now()
}

// Measure reads a table's log. A table that does not exist yet measures
// as Exists=false, not an error.
func Measure(ctx context.Context, t Table, opts MeasureOptions) (Measurements, error) {
	m, _, err := measure(ctx, t, opts)
	return m, err
}

// measure is Measure that also returns the snapshot it measured (nil when
// the table does not exist), for Run's steps to commit on instead of
// loading it again. The snapshot is full (LoadWithLog never loads a lean
// one) and the log is listed once, for the snapshot and LogCleanable both.
func measure(ctx context.Context, t Table, opts MeasureOptions) (Measurements, *delta.Snapshot, error) {
	m := unmeasured(t)
	snap, log, err := delta.LoadWithLog(ctx, t.Store)
	if notFound(err) {
		return m, nil, nil
	}
	if err != nil {
		return m, nil, err
	}
	m, err = measureSnapshot(t, snap, log, opts)
	return m, snap, err
}

// unmeasured is the measurement of a table not (yet) read: no versions.
func unmeasured(t Table) Measurements {
	return Measurements{Table: t.Key.Path(), Kind: string(t.Key.Kind), Version: -1, CheckpointVersion: -1}
}

// errLeanSnapshot refuses to measure a lean snapshot: it lacks the live
// files and tombstones of its base checkpoint, so every file count would
// be too low and a due step would be missed.
var errLeanSnapshot = errors.New("maintain: a lean snapshot has no full file list to measure")

// measureSnapshot measures a loaded snapshot and the listing of its log.
func measureSnapshot(t Table, snap *delta.Snapshot, log []store.ObjectInfo, opts MeasureOptions) (Measurements, error) {
	if opts.TargetSize <= 0 {
		opts.TargetSize = DefaultTargetSize
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	m := unmeasured(t)
	if snap.Lean() {
		return m, fmt.Errorf("%w (table %s)", errLeanSnapshot, snap.Table())
	}
	m.Exists = true
	m.Version = snap.Version()
	m.CheckpointVersion = snap.CheckpointVersion()
	base := max(m.CheckpointVersion, -1)
	m.CommitsSinceCheckpoint = m.Version - base
	m.CheckpointInterval = checkpointInterval(snap)
	for _, a := range snap.Files() {
		m.LiveFiles++
		m.LiveBytes += a.Size
		if a.Size < opts.TargetSize {
			m.SmallFiles++
			m.SmallBytes += a.Size
		}
		if mayHoldErasedBody(a.Stats) && t.Key.Kind == tables.Silver {
			m.ErasedBodyFiles++
		}
	}
	var err error
	if m.Retention, err = snap.DeletedFileRetention(); err != nil {
		return m, err
	}
	m.RetentionSeconds = m.Retention.Seconds()
	cutoff := now.Add(-m.Retention).UnixMilli()
	for _, r := range snap.Tombstones() {
		m.Tombstones++
		size := int64(0)
		if r.Size != nil {
			size = *r.Size
		}
		m.TombstonedBytes += size
		expired := r.DeletionTimestamp == nil || *r.DeletionTimestamp <= cutoff
		if expired {
			m.ExpiredTombstones++
			m.ExpiredBytes += size
		} else {
			at := time.UnixMilli(*r.DeletionTimestamp).Add(m.Retention)
			if m.NextExpiry.IsZero() || at.Before(m.NextExpiry) {
				m.NextExpiry = at
			}
		}
		if t.Key.Kind == tables.Silver && mayHoldErasedBody(r.Stats) {
			m.ErasedTombstones++
			if expired {
				m.ErasedTombstonesExpired++
			}
		}
	}
	if m.LogCleanable, err = logCleanable(snap, log, now); err != nil {
		return m, err
	}
	return m, nil
}

func checkpointInterval(s *delta.Snapshot) int64 {
	if v, ok := s.Metadata().Configuration["delta.checkpointInterval"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return delta.DefaultCheckpointInterval
}

// logCleanable mirrors delta.CleanupLog's rule without deleting: the newest
// classic checkpoint whose commit is older than the log retention is kept,
// and the commits before it are what cleanup would delete. objs is the
// listing of the whole log (delta.LoadWithLog).
func logCleanable(s *delta.Snapshot, objs []store.ObjectInfo, now time.Time) (int, error) {
	retention := delta.DefaultLogRetention
	if v, ok := s.Metadata().Configuration["delta.logRetentionDuration"]; ok {
		d, err := delta.ParseInterval(v)
		if err != nil {
			return 0, fmt.Errorf("table %s: %w", s.Table(), err)
		}
		retention = d
	}
	cutoff := now.Add(-retention)
	commits := map[int64]time.Time{}
	var cps []int64
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, delta.LogDir)
		if len(name) < 21 || name[20] != '.' {
			continue
		}
		v, err := strconv.ParseInt(name[:20], 10, 64)
		if err != nil {
			continue
		}
		switch {
		case name[21:] == "json":
			commits[v] = o.ModTime
		case name[21:] == "checkpoint.parquet":
			cps = append(cps, v)
		}
	}
	keep := int64(-1)
	for _, v := range cps {
		if at, ok := commits[v]; ok && at.Before(cutoff) && v > keep {
			keep = v
		}
	}
	n := 0
	for v := range commits {
		if v < keep {
			n++
		}
	}
	return n, nil
}

// fileStats is the part of add.stats maintenance reads.
type fileStats struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  map[string]any `json:"minValues"`
	MaxValues  map[string]any `json:"maxValues"`
	NullCount  map[string]any `json:"nullCount"`
}

// mayHoldErasedBody says from a silver file's stats whether it may hold a
// row with state "erased" and a non-null body. Missing or unreadable stats
// answer yes: erasure must never be skipped because a statistic is absent.
func mayHoldErasedBody(stats string) bool {
	if stats == "" {
		return true
	}
	var fs fileStats
	if err := json.Unmarshal([]byte(stats), &fs); err != nil {
		return true
	}
	if nc, ok := fs.NullCount[tables.SilverBody.Name()].(float64); ok && int64(nc) >= fs.NumRecords {
		return false // every body in the file is already null
	}
	if nc, ok := fs.NullCount[tables.SilverState.Name()].(float64); ok && int64(nc) >= fs.NumRecords {
		return false
	}
	lo, lok := fs.MinValues[tables.SilverState.Name()].(string)
	hi, hok := fs.MaxValues[tables.SilverState.Name()].(string)
	if lok && lo > StateErased {
		return false
	}
	if hok && hi < StateErased {
		return false
	}
	return true
}

// mayHoldArtifact says from a file's stats whether its artifact_id range
// may contain id (missing stats: yes).
func mayHoldArtifact(stats string, id string) bool {
	if stats == "" {
		return true
	}
	var fs fileStats
	if err := json.Unmarshal([]byte(stats), &fs); err != nil {
		return true
	}
	lo, lok := fs.MinValues[tables.SilverArtifactID.Name()].(string)
	hi, hok := fs.MaxValues[tables.SilverArtifactID.Name()].(string)
	if lok && id < lo {
		return false
	}
	// The max is a 32-character prefix with a tie-breaker appended, so
	// comparing with it is safe as written.
	if hok && id > hi {
		return false
	}
	return true
}

// bodyNulls is the body null count a file's stats give (-1: unknown).
func bodyNulls(stats string) int64 {
	var fs fileStats
	if stats == "" || json.Unmarshal([]byte(stats), &fs) != nil {
		return -1
	}
	if nc, ok := fs.NullCount[tables.SilverBody.Name()].(float64); ok {
		return int64(nc)
	}
	return -1
}

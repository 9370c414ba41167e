package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
)

// HistoryEntry is one commit as `oml lake history` shows it.
type HistoryEntry struct {
	Version int64
	// Timestamp is commitInfo.timestamp (ms), else the commit file's
	// modification time.
	Timestamp           int64
	Operation           string
	OperationParameters map[string]any
	OperationMetrics    map[string]any
	EngineInfo          string
	Txns                []Txn
	AddedFiles          int
	RemovedFiles        int
	CommitInfo          json.RawMessage
}

// HistoryOptions bound what History reads.
type HistoryOptions struct {
	// Limit is the number of newest commits to return (0: all that are
	// still in the log).
	Limit int
}

// History returns the commits still present in the log, newest first.
// Commits removed by log cleanup (behind a checkpoint) are not shown.
func History(ctx context.Context, st store.Store, opts HistoryOptions) ([]HistoryEntry, error) {
	l, err := listLog(ctx, st, 0)
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 {
		return nil, fmt.Errorf("%w at %s: %s is missing or empty", ErrTableNotFound, st, LogDir)
	}
	// The contiguous run of commits ending at the newest one.
	from := l.maxCommit
	for from > 0 {
		if _, ok := l.commits[from-1]; !ok {
			break
		}
		from--
	}
	if opts.Limit > 0 && l.maxCommit-int64(opts.Limit)+1 > from {
		from = l.maxCommit - int64(opts.Limit) + 1
	}
	out := make([]HistoryEntry, 0, l.maxCommit-from+1)
	err = fetchOrdered(ctx, from, l.maxCommit, func(ctx context.Context, v int64) ([]byte, error) {
		return st.Get(ctx, CommitKey(v))
	}, func(v int64, b []byte) error {
		e, err := historyEntry(st, v, b)
		if err != nil {
			return err
		}
		if e.Timestamp == 0 {
			e.Timestamp = l.commits[v].modTime.UnixMilli()
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func historyEntry(st store.Store, v int64, b []byte) (HistoryEntry, error) {
	acts, err := DecodeCommitBytes(b)
	if err != nil {
		return HistoryEntry{}, fmt.Errorf("table %s: commit %d: %w", st, v, err)
	}
	e := HistoryEntry{Version: v}
	for i := range acts {
		a := &acts[i]
		switch {
		case isSet(a.CommitInfo):
			ci := ParseCommitInfo(a.CommitInfo)
			e.Timestamp, e.Operation, e.EngineInfo = ci.Timestamp, ci.Operation, ci.EngineInfo
			e.OperationParameters, e.OperationMetrics, e.CommitInfo = ci.OperationParameters, ci.OperationMetrics, ci.Raw
		case a.Add != nil:
			e.AddedFiles++
		case a.Remove != nil:
			e.RemovedFiles++
		case a.Txn != nil:
			e.Txns = append(e.Txns, *a.Txn)
		}
	}
	return e, nil
}

// CommitEntry reads one commit, known to exist, as History shows it (one
// read, no listing; Timestamp is 0 when the commit has no commitInfo
// timestamp). ErrVersionNotFound when the commit file is gone.
func CommitEntry(ctx context.Context, st store.Store, v int64) (HistoryEntry, error) {
	b, err := st.Get(ctx, CommitKey(v))
	if errors.Is(err, store.ErrNotFound) {
		return HistoryEntry{}, fmt.Errorf("%w: table %s: commit %d is not in the log", ErrVersionNotFound, st, v)
	}
	if err != nil {
		return HistoryEntry{}, fmt.Errorf("table %s: reading commit %d: %w", st, v, err)
	}
	return historyEntry(st, v, b)
}

// ErrBeforeFirstCommit means a time-travel timestamp is earlier than every
// commit still in the table's log.
var ErrBeforeFirstCommit = errors.New("the timestamp is before the table's first commit")

// VersionAsOf is time travel by timestamp: the latest version whose commit
// timestamp (commitInfo.timestamp, else the commit file's modification
// time, as History reports it) is at or before ts. Only commits still in
// the log count (log cleanup removes old ones behind a checkpoint); a ts
// before the oldest of them is ErrBeforeFirstCommit. Every commit is read,
// newest first, so a clock that went backwards between commits cannot hide
// a later version whose timestamp is ≤ ts.
func VersionAsOf(ctx context.Context, st store.Store, ts time.Time) (int64, error) {
	hist, err := History(ctx, st, HistoryOptions{})
	if err != nil {
		return -1, err
	}
	ms := ts.UnixMilli()
	for _, e := range hist { // newest first
		if e.Timestamp <= ms {
			return e.Version, nil
		}
	}
	oldest := hist[len(hist)-1]
	return -1, fmt.Errorf("%w: table %s: %s is before its oldest commit in the log (version %d, %s)", ErrBeforeFirstCommit,
		st, ts.UTC().Format(time.RFC3339Nano), oldest.Version, time.UnixMilli(oldest.Timestamp).UTC().Format(time.RFC3339Nano))
}

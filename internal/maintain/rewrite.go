package maintain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// ErrGaveUp is returned (wrapped) when a rewrite kept losing commit races
// to commits that removed the files it was replacing. Nothing was
// published; the next run starts again from the table as it is then.
var ErrGaveUp = errors.New("maintenance rewrite gave up after repeated concurrent changes")

// CompactOptions configure Compact.
type CompactOptions struct {
	TargetSize int64 // default 128 MiB
	MinFiles   int   // small files a partition needs before it is compacted (default 2)
	// Restarts bounds how often a compaction whose files another commit
	// removed starts again from the new snapshot (default 3).
	Restarts int
	Now      func() time.Time // tests; nil: time.Now
}

// CompactResult says what Compact did.
type CompactResult struct {
	Version      int64 `json:"version"` // -1: nothing committed
	FilesRemoved int   `json:"files_removed"`
	FilesAdded   int   `json:"files_added"`
	BytesRemoved int64 `json:"bytes_removed"`
	BytesAdded   int64 `json:"bytes_added"`
	Rows         int64 `json:"rows"`
	Restarts     int   `json:"restarts"` // compactions redone after a concurrent MERGE
}

// Compact compacts a table's small files with delta.Optimize, sorted by
// SortKey. A compaction that loses its commit race is re-validated by
// delta.Optimize: if every file it replaces is still live (the winner
// only appended) it is committed on top; if the winner removed one of
// them (the lake writer's MERGE rewrote it) it is abandoned, and Compact
// starts again from the new snapshot, at most Restarts times.
func Compact(ctx context.Context, t Table, opts CompactOptions) (CompactResult, error) {
	res, _, err := compact(ctx, t, nil, opts)
	return res, err
}

// compact is Compact whose first attempt works on w's snapshot (nil: open
// a writer, which loads the table). It returns the writer it committed
// with, or nil after an error or when the table does not exist.
func compact(ctx context.Context, t Table, w *delta.Writer, opts CompactOptions) (CompactResult, *delta.Writer, error) {
	if opts.Restarts <= 0 {
		opts.Restarts = 3
	}
	res := CompactResult{Version: -1}
	for attempt := 0; ; attempt++ {
		var err error
		if w, err = writerFor(ctx, t, w, opts.Now); w == nil || err != nil {
			return res, nil, err // nil, nil: not created yet, nothing to rewrite
		}
		r, err := delta.Optimize(ctx, w, delta.OptimizeOptions{
			TargetSize: opts.TargetSize, MinFiles: opts.MinFiles, SortBy: SortKey(t.Key.Kind),
		})
		// Abandoned (a winner removed a file being replaced) or still losing
		// races after delta.Optimize's own retries: start again from the
		// table as it is now.
		if errors.Is(err, delta.ErrOptimizeAbandoned) || errors.Is(err, delta.ErrConflict) {
			if attempt >= opts.Restarts {
				return res, nil, fmt.Errorf("%w: compacting %s: %w", ErrGaveUp, t.Key, err)
			}
			res.Restarts++
			w = nil
			continue
		}
		if err != nil {
			return res, nil, fmt.Errorf("compacting %s: %w", t.Key, err)
		}
		res.Version, res.FilesRemoved, res.FilesAdded = r.Version, r.FilesRemoved, r.FilesAdded
		res.BytesRemoved, res.BytesAdded, res.Rows = r.BytesRemoved, r.BytesAdded, r.Rows
		return res, w, nil
	}
}

// writerFor is w, or (w nil) a writer opened on the table: nil and no
// error when the table does not exist yet.
func writerFor(ctx context.Context, t Table, w *delta.Writer, now func() time.Time) (*delta.Writer, error) {
	if w != nil {
		return w, nil
	}
	w, err := delta.OpenWriter(ctx, t.Store, delta.Options{Now: now})
	if notFound(err) {
		return nil, nil
	}
	return w, err
}

// EraseResult says what EraseBodies did.
type EraseResult struct {
	Version        int64 `json:"version"` // -1: nothing committed
	FilesScanned   int   `json:"files_scanned"`
	FilesRewritten int   `json:"files_rewritten"`
	BodiesNulled   int   `json:"bodies_nulled"`
	Restarts       int   `json:"restarts"`
}

// EraseOptions configure EraseBodies.
type EraseOptions struct {
	Restarts int              // default 3
	Now      func() time.Time // tests; nil: time.Now
}

// EraseBodies rewrites every live silver file holding a row with state
// erased and a non-null body, with those bodies set to null, in one commit
// (operation UPDATE, dataChange true: a column's value changes, so this is
// not a compaction and change-feed readers must see it). Files are chosen
// by their stats (state range, body null count), then read to confirm;
// size does not matter. Other tables have no bodies: nothing to do.
//
// Race rules as for Compact: after a lost race the commit goes on top of
// the winners only if every file it replaces is still live; otherwise the
// rewrite starts again from the new snapshot.
func EraseBodies(ctx context.Context, t Table, opts EraseOptions) (EraseResult, error) {
	res, _, err := eraseBodies(ctx, t, nil, opts)
	return res, err
}

// eraseBodies is EraseBodies whose first attempt works on w's snapshot
// (nil: open a writer). It returns the writer it ended on, or nil after
// an error, on a table that is not silver or does not exist.
func eraseBodies(ctx context.Context, t Table, w *delta.Writer, opts EraseOptions) (EraseResult, *delta.Writer, error) {
	res := EraseResult{Version: -1}
	if t.Key.Kind != tables.Silver {
		return res, w, nil
	}
	if opts.Restarts <= 0 {
		opts.Restarts = 3
	}
	for attempt := 0; ; attempt++ {
		var err error
		if w, err = writerFor(ctx, t, w, opts.Now); w == nil || err != nil {
			return res, nil, err // nil, nil: not created yet, nothing to rewrite
		}
		v, scanned, files, nulled, err := eraseOnce(ctx, w)
		res.FilesScanned += scanned
		if errors.Is(err, errFilesChanged) || errors.Is(err, delta.ErrConflict) {
			if attempt >= opts.Restarts {
				return res, nil, fmt.Errorf("%w: erasing bodies in %s: %w", ErrGaveUp, t.Key, err)
			}
			res.Restarts++
			w = nil
			continue
		}
		if err != nil {
			return res, nil, fmt.Errorf("erasing bodies in %s: %w", t.Key, err)
		}
		res.Version, res.FilesRewritten, res.BodiesNulled = v, files, nulled
		return res, w, nil
	}
}

// beforeEraseCommit, set only by tests, runs between an erase-bodies
// rewrite's read and its first commit attempt (to land a competing commit
// there deterministically).
var beforeEraseCommit func()

var errFilesChanged = errors.New("a file being rewritten was removed by a concurrent commit")

// conflictRetries bounds how often one prepared rewrite is re-validated
// and committed on top of winners that left its files alone.
const conflictRetries = 5

func eraseOnce(ctx context.Context, w *delta.Writer) (version int64, scanned, files, nulled int, err error) {
	snap := w.Snapshot()
	schema := snap.Schema()
	stateIdx, bodyIdx := -1, -1
	for i, f := range schema.Fields {
		switch f.Name {
		case tables.SilverState.Name():
			stateIdx = i
		case tables.SilverBody.Name():
			bodyIdx = i
		}
	}
	if stateIdx < 0 || bodyIdx < 0 {
		return -1, 0, 0, 0, fmt.Errorf("table %s has no state/body columns: it is not oml's silver.claims", snap.Table())
	}
	var c delta.Commit
	for _, f := range snap.Files() {
		if !mayHoldErasedBody(f.Stats) {
			continue
		}
		scanned++
		// Cheap check first: read only the state column. In oml only an
		// erased row ever has a null body (the lake writer refuses a
		// promotion without one; reconcile reports any other), so when the
		// file's body null count covers its erased rows they are all done
		// and the bodies need not be read.
		erasedRows := int64(0)
		states := tables.SilverColumns(tables.SilverState)
		if err := snap.Scan(ctx, w.Store(), delta.ScanOptions{Columns: states.Columns(), Files: []*delta.Add{f}}, func(_ *delta.Add, b []pq.Row) error {
			for _, r := range b {
				if states.Decode(r).State == StateErased {
					erasedRows++
				}
			}
			return nil
		}); err != nil {
			return -1, scanned, 0, 0, err
		}
		if erasedRows == 0 || bodyNulls(f.Stats) >= erasedRows {
			continue
		}
		var rows []pq.Row
		if err := snap.Scan(ctx, w.Store(), delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, b []pq.Row) error {
			rows = append(rows, b...)
			return nil
		}); err != nil {
			return -1, scanned, 0, 0, err
		}
		n := 0
		for _, r := range rows {
			if s, _ := r[stateIdx].(string); s == StateErased && r[bodyIdx] != nil {
				r[bodyIdx] = nil
				n++
			}
		}
		if n == 0 {
			continue
		}
		add, err := w.WriteFile(ctx, f.PartitionValues, snap.DataRows(rows))
		if err != nil {
			return -1, scanned, 0, 0, err
		}
		key, err := delta.DecodePath(f.Path)
		if err != nil {
			return -1, scanned, 0, 0, err
		}
		rm, err := w.Remove(key)
		if err != nil {
			return -1, scanned, 0, 0, err
		}
		c.Adds = append(c.Adds, add)
		c.Removes = append(c.Removes, rm)
		files++
		nulled += n
	}
	if files == 0 {
		return -1, scanned, 0, 0, nil
	}
	c.Operation = "UPDATE"
	c.OperationParameters = map[string]any{"predicate": "[\"(state = 'erased' AND body IS NOT NULL)\"]"}
	c.OperationMetrics = map[string]any{
		"numUpdatedRows": fmt.Sprint(nulled), "numRemovedFiles": fmt.Sprint(files), "numAddedFiles": fmt.Sprint(files),
	}
	c.Extra = map[string]any{"omlMaintenance": "erase-bodies"}
	if beforeEraseCommit != nil {
		beforeEraseCommit()
	}
	for attempt := 0; ; attempt++ {
		v, err := w.Commit(ctx, c)
		if err == nil {
			return v, scanned, files, nulled, nil
		}
		var ce *delta.ConflictError
		if !errors.As(err, &ce) || attempt >= conflictRetries {
			return -1, scanned, 0, 0, err
		}
		// The writer has caught up with the winners. Publish on top of them
		// only if every file this rewrite replaces is still live.
		now := w.Snapshot()
		for _, rm := range c.Removes {
			key, _ := delta.DecodePath(rm.Path)
			if _, ok := now.File(key); !ok {
				return -1, scanned, 0, 0, fmt.Errorf("%w: %s was removed by version %d", errFilesChanged, key, now.Version())
			}
		}
	}
}

package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/pq"
)

// OptimizeOptions configure Optimize.
type OptimizeOptions struct {
	// TargetSize is the size files are compacted towards; files at or above
	// it are left alone. Default 128 MiB. The rows of one output file are
	// held in memory while it is written.
	TargetSize int64
	// MinFiles is the number of small files a partition needs before it is
	// compacted (default 2).
	MinFiles int
	// SortBy orders the rows of each output file by these columns (nulls
	// first), so that per-file min/max stats prune well.
	SortBy []string
	// Retries bounds how often a compaction that lost a commit race is
	// re-validated and retried (default 3).
	Retries int
}

// OptimizeResult says what Optimize did.
type OptimizeResult struct {
	Version      int64 // the compaction's commit, -1 if nothing was committed
	FilesRemoved int
	FilesAdded   int
	BytesRemoved int64
	BytesAdded   int64
	Rows         int64
	// Abandoned is set when a concurrent commit removed one of the files
	// being compacted: nothing was published (the new files are orphans
	// that vacuum deletes after the retention).
	Abandoned bool
}

// ErrOptimizeAbandoned is returned (wrapped) when a concurrent commit
// removed files the compaction was replacing.
var ErrOptimizeAbandoned = errors.New("compaction abandoned: the files it replaces changed")

type compactionBin struct {
	partition map[string]*string
	files     []*Add
	bytes     int64
}

// Optimize compacts the small files of each partition into files of about
// TargetSize in one commit (operation OPTIMIZE): removes and adds with
// dataChange=false, so readers of the change feed and append-only tables
// are unaffected. If another writer commits in between, the compaction is
// re-validated: when every file it replaces is still live it is committed
// at the next version; otherwise it is abandoned, never published blindly.
func Optimize(ctx context.Context, w *Writer, opts OptimizeOptions) (OptimizeResult, error) {
	res := OptimizeResult{Version: -1}
	if opts.TargetSize <= 0 {
		opts.TargetSize = 128 << 20
	}
	if opts.MinFiles <= 0 {
		opts.MinFiles = 2
	}
	if opts.Retries <= 0 {
		opts.Retries = 3
	}
	snap := w.Snapshot()
	bins := planCompaction(snap, opts)
	if len(bins) == 0 {
		return res, nil
	}
	sortIdx, err := sortColumns(snap, opts.SortBy)
	if err != nil {
		return res, err
	}
	var commit Commit
	for _, b := range bins {
		var rows []pq.Row
		err := snap.Scan(ctx, w.Store(), ScanOptions{Files: b.files}, func(_ *Add, batch []pq.Row) error {
			rows = append(rows, batch...)
			return nil
		})
		if err != nil {
			return res, err
		}
		if len(sortIdx) > 0 {
			sort.SliceStable(rows, func(i, j int) bool { return lessRow(rows[i], rows[j], sortIdx) })
		}
		add, err := w.WriteFile(ctx, b.partition, snap.DataRows(rows))
		if err != nil {
			return res, err
		}
		add.DataChange = false
		commit.Adds = append(commit.Adds, add)
		res.FilesAdded++
		res.BytesAdded += add.Size
		res.Rows += int64(len(rows))
		for _, f := range b.files {
			key, err := DecodePath(f.Path)
			if err != nil {
				return res, err
			}
			rm, err := w.RemoveCompacted(key)
			if err != nil {
				return res, err
			}
			commit.Removes = append(commit.Removes, rm)
			res.FilesRemoved++
			res.BytesRemoved += f.Size
		}
	}
	commit.Operation = "OPTIMIZE"
	commit.OperationParameters = map[string]any{"predicate": "[]", "targetSize": fmt.Sprint(opts.TargetSize), "zOrderBy": "[]", "sortBy": strings.Join(opts.SortBy, ",")}
	commit.OperationMetrics = map[string]any{
		"numRemovedFiles": fmt.Sprint(res.FilesRemoved), "numAddedFiles": fmt.Sprint(res.FilesAdded),
		"numRemovedBytes": fmt.Sprint(res.BytesRemoved), "numAddedBytes": fmt.Sprint(res.BytesAdded),
	}
	for attempt := 0; ; attempt++ {
		v, err := w.Commit(ctx, commit)
		if err == nil {
			res.Version = v
			return res, nil
		}
		var ce *ConflictError
		if !errors.As(err, &ce) || attempt >= opts.Retries {
			return res, err
		}
		// The writer caught up with the winners: retry only if every file
		// this compaction replaces is still live.
		now := w.Snapshot()
		for _, rm := range commit.Removes {
			key, _ := DecodePath(rm.Path)
			if _, ok := now.File(key); !ok {
				res.Abandoned = true
				return res, fmt.Errorf("%w: %s was removed by version %d", ErrOptimizeAbandoned, key, now.Version())
			}
		}
		ts := w.opts.now().UnixMilli()
		for _, rm := range commit.Removes {
			rm.DeletionTimestamp = &ts
		}
	}
}

func partitionKey(pv map[string]*string, cols []string) string {
	var b strings.Builder
	for _, c := range cols {
		if v := pv[c]; v != nil {
			b.WriteString("=" + *v)
		} else {
			b.WriteString("\x00null")
		}
		b.WriteByte('\x01')
	}
	return b.String()
}

// planCompaction groups the small live files by partition and bin-packs
// them (smallest first) into bins of at most TargetSize; only bins of two
// or more files are worth rewriting.
func planCompaction(s *Snapshot, opts OptimizeOptions) []compactionBin {
	cols := s.metadata.PartitionColumns
	groups := map[string][]*Add{}
	var keys []string
	for _, a := range s.Files() {
		if a.Size >= opts.TargetSize {
			continue
		}
		k := partitionKey(a.PartitionValues, cols)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], a)
	}
	sort.Strings(keys)
	var bins []compactionBin
	for _, k := range keys {
		files := groups[k]
		if len(files) < opts.MinFiles {
			continue
		}
		sort.SliceStable(files, func(i, j int) bool { return files[i].Size < files[j].Size })
		cur := compactionBin{partition: files[0].PartitionValues}
		flush := func() {
			if len(cur.files) >= 2 {
				bins = append(bins, cur)
			}
			cur = compactionBin{partition: files[0].PartitionValues}
		}
		for _, f := range files {
			if len(cur.files) > 0 && cur.bytes+f.Size > opts.TargetSize {
				flush()
			}
			cur.files = append(cur.files, f)
			cur.bytes += f.Size
		}
		flush()
	}
	return bins
}

// DataRows returns scanned rows as WriteFile takes them: Scan yields every
// schema column, partition columns included, and a data file does not store
// the partition columns (its partition values say them). rows is not changed.
func (s *Snapshot) DataRows(rows []pq.Row) []pq.Row {
	idx := dataColumnIndexes(s)
	data := make([]pq.Row, len(rows))
	for i, r := range rows {
		d := make(pq.Row, len(idx))
		for j, k := range idx {
			d[j] = r[k]
		}
		data[i] = d
	}
	return data
}

func dataColumnIndexes(s *Snapshot) []int {
	part := map[string]bool{}
	for _, p := range s.metadata.PartitionColumns {
		part[p] = true
	}
	var idx []int
	for i, f := range s.schema.Fields {
		if !part[f.Name] {
			idx = append(idx, i)
		}
	}
	return idx
}

func sortColumns(s *Snapshot, names []string) ([]int, error) {
	var idx []int
	for _, n := range names {
		found := -1
		for i, f := range s.schema.Fields {
			if f.Name == n {
				found = i
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("delta: table %s has no column %q to sort by", s.table, n)
		}
		switch s.schema.Fields[found].Type.(type) {
		case *StructType, *ArrayType, *MapType:
			return nil, fmt.Errorf("delta: column %q is nested and cannot be a sort key", n)
		}
		idx = append(idx, found)
	}
	return idx, nil
}

func lessRow(a, b pq.Row, idx []int) bool {
	for _, i := range idx {
		if c := compareValues(a[i], b[i]); c != 0 {
			return c < 0
		}
	}
	return false
}

// compareValues orders two scalar values of the same column; nil first.
func compareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	cmp := compareOrdered[int64]
	switch x := a.(type) {
	case int64:
		return cmp(x, b.(int64))
	case int32:
		return cmp(int64(x), int64(b.(int32)))
	case int16:
		return cmp(int64(x), int64(b.(int16)))
	case int8:
		return cmp(int64(x), int64(b.(int8)))
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case float32:
		return compareOrdered(x, b.(float32))
	case float64:
		return compareOrdered(x, b.(float64))
	case pq.Date:
		return cmp(int64(x), int64(b.(pq.Date)))
	case time.Time:
		return x.Compare(b.(time.Time))
	case pq.Decimal:
		return x.Cmp(b.(pq.Decimal))
	}
	return 0
}

// compareOrdered is -1, 0 or 1 as x is below, equal to or above y. It is not
// cmp.Compare, which orders a NaN first: compareValues has always held a NaN
// equal to everything, and the row order Optimize writes must not change.
func compareOrdered[T int64 | float32 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// PQType maps a Delta data type to the pq model type.
func PQType(t DataType) (*pq.Type, error) {
	switch t := t.(type) {
	case *PrimitiveType:
		switch t.Name {
		case TypeLong:
			return pq.Int64, nil
		case TypeInteger:
			return pq.Int32, nil
		case TypeShort:
			return pq.Int16, nil
		case TypeByte:
			return pq.Int8, nil
		case TypeFloat:
			return pq.Float, nil
		case TypeDouble:
			return pq.Double, nil
		case TypeString:
			return pq.String, nil
		case TypeBinary:
			return pq.Binary, nil
		case TypeBoolean:
			return pq.Boolean, nil
		case TypeDate:
			return pq.DateType, nil
		case TypeTimestamp:
			return pq.Timestamp, nil
		case TypeTimestampNTZ:
			return pq.TimestampNTZ, nil
		}
		return nil, fmt.Errorf("%w: data type %q", ErrUnsupported, t.Name)
	case *DecimalType:
		return pq.DecimalOf(t.Precision, t.Scale), nil
	case *StructType:
		fs := make([]pq.Field, 0, len(t.Fields))
		for _, f := range t.Fields {
			ft, err := PQType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			fs = append(fs, pq.Field{Name: f.Name, Type: ft, Nullable: f.Nullable})
		}
		return pq.StructOf(fs...), nil
	case *ArrayType:
		et, err := PQType(t.ElementType)
		if err != nil {
			return nil, err
		}
		return pq.ListOf(et, t.ContainsNull), nil
	case *MapType:
		kt, err := PQType(t.KeyType)
		if err != nil {
			return nil, err
		}
		vt, err := PQType(t.ValueType)
		if err != nil {
			return nil, err
		}
		return pq.MapOf(kt, vt, t.ValueContainsNull), nil
	}
	return nil, fmt.Errorf("delta: unknown data type %T", t)
}

// DataSchema is the Parquet schema of the table's data files: the table
// schema without the partition columns (their values live in the log).
func (s *Snapshot) DataSchema() (*pq.Schema, error) {
	part := map[string]bool{}
	for _, p := range s.metadata.PartitionColumns {
		part[p] = true
	}
	var fs []pq.Field
	for _, f := range s.schema.Fields {
		if part[f.Name] {
			continue
		}
		t, err := PQType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		fs = append(fs, pq.Field{Name: f.Name, Type: t, Nullable: f.Nullable})
	}
	return pq.NewSchema(fs...), nil
}

// layouts caches the Parquet layout of each data schema (keyed by the
// schema string and the partition columns): every data file of a table,
// and of every table of the same kind, shares one, instead of converting the
// schema and preparing the writer properties per file. Bounded: a process
// that sees more distinct schemas (a maintenance pass over foreign tables)
// starts the cache over.
var layouts struct {
	mu sync.Mutex
	m  map[string]*pq.Layout
}

const maxLayouts = 256

// dataLayout returns the Parquet layout of the snapshot's data files
// (DataSchema, default pq.Options).
func (s *Snapshot) dataLayout() (*pq.Layout, error) {
	key := s.metadata.SchemaString + "\x00" + strings.Join(s.metadata.PartitionColumns, "\x00")
	layouts.mu.Lock()
	l, ok := layouts.m[key]
	layouts.mu.Unlock()
	if ok {
		return l, nil
	}
	schema, err := s.DataSchema()
	if err != nil {
		return nil, err
	}
	if l, err = pq.NewLayout(schema, pq.Options{}); err != nil {
		return nil, err
	}
	layouts.mu.Lock()
	defer layouts.mu.Unlock()
	if layouts.m == nil || len(layouts.m) >= maxLayouts {
		layouts.m = map[string]*pq.Layout{}
	}
	layouts.m[key] = l
	return l, nil
}

// hiveEscape escapes a partition value for a directory name the way Hive
// and Spark do, so other engines recognize the layout.
func hiveEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PutStream streams what produce writes to the store under key (memory
// stays bounded by the producer's buffering, not by the file size). The
// object becomes visible only if produce succeeds. Data files use it, and
// so does the repair archive (internal/lakerepair).
func PutStream(ctx context.Context, st store.Store, key string, produce func(io.Writer) error) error {
	return putStream(ctx, st, key, putNow, produce)
}

// putFunc is how putStream stores the object: putNow (durable when it
// returns) or store.PutOwed (a data file: durable before the commit that
// names it publishes, which is the next write of the same store).
type putFunc func(ctx context.Context, st store.Store, key string, r io.Reader, size int64) error

func putNow(ctx context.Context, st store.Store, key string, r io.Reader, size int64) error {
	return st.Put(ctx, key, r, size)
}

// smallObject: a producer that writes at most this many bytes is put in
// one call with its size known (no pipe, no goroutine, no chunked copy; on
// S3 one request); a bigger one streams, holding at most this much.
const smallObject = 1 << 20

// objectBufs recycles the buffers of small objects (a data file of a few
// rows per table commit, thousands of them per batch at many tenants).
var objectBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putStream(ctx context.Context, st store.Store, key string, put putFunc, produce func(io.Writer) error) error {
	buf := objectBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 2*smallObject {
			objectBufs.Put(buf)
		}
	}()
	sw := &spillWriter{ctx: ctx, st: st, key: key, put: put, buf: buf}
	werr := produce(sw)
	if sw.pw == nil {
		if werr != nil {
			return werr // nothing was put
		}
		return put(ctx, st, key, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	}
	if werr != nil {
		sw.cancel() // make sure a half-written object is never published
	}
	sw.pw.CloseWithError(werr)
	perr := <-sw.done
	sw.cancel()
	switch {
	case perr != nil && (werr == nil || !errors.Is(perr, context.Canceled)):
		return perr // the store's failure is the cause; the producer only saw a closed pipe
	case werr != nil:
		return werr
	}
	return nil
}

// spillWriter buffers up to smallObject bytes, then streams everything to
// a Put of unknown size through a pipe.
type spillWriter struct {
	ctx    context.Context
	st     store.Store
	key    string
	put    putFunc
	buf    *bytes.Buffer
	pw     *io.PipeWriter // nil until it spills
	done   chan error
	cancel context.CancelFunc
}

func (w *spillWriter) Write(p []byte) (int, error) {
	if w.pw == nil {
		if w.buf.Len()+len(p) <= smallObject {
			return w.buf.Write(p)
		}
		var ctx context.Context
		ctx, w.cancel = context.WithCancel(w.ctx)
		pr, pw := io.Pipe()
		w.pw, w.done = pw, make(chan error, 1)
		go func() {
			err := w.put(ctx, w.st, w.key, pr, -1)
			pr.CloseWithError(err)
			w.done <- err
		}()
		if _, err := pw.Write(w.buf.Bytes()); err != nil {
			return 0, err
		}
	}
	return w.pw.Write(p)
}

// WriteFile writes rows as one new Parquet data file of the partition
// given by partitionValues (one entry per partition column; nil = null) and
// returns its add action (dataChange true, stats computed from the
// written data). Rows hold one value per column of DataSchema, in order.
// The file is written whole under a unique name before it is referenced;
// if the commit never happens it is an orphan for vacuum.
func (w *Writer) WriteFile(ctx context.Context, partitionValues map[string]*string, rows []pq.Row) (*Add, error) {
	w.mu.Lock()
	snap := w.snap
	layout, err := snap.dataLayout()
	partCols := snap.metadata.PartitionColumns
	statsCols := numIndexedCols(&snap.metadata)
	fresh := snap.version < 0
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if fresh {
		// A table's first data file: make its log directory now, so the
		// file store's flush of the table directory for this file also
		// carries the log directory's entry (store.PrepareDir): per file
		// the fsync after the file's rename, in rounds the first commit's
		// round before publishing.
		if err := store.PrepareDir(ctx, w.st, LogDir); err != nil {
			return nil, fmt.Errorf("delta: table %s: %w", w.table, err)
		}
	}
	if len(partitionValues) != len(partCols) {
		return nil, fmt.Errorf("delta: table %s has %d partition columns, got values for %d", w.table, len(partCols), len(partitionValues))
	}
	dir := ""
	pv := make(map[string]*string, len(partCols))
	for _, c := range partCols {
		v, ok := partitionValues[c]
		if !ok {
			return nil, fmt.Errorf("delta: no value for partition column %q", c)
		}
		seg := "__HIVE_DEFAULT_PARTITION__"
		if v != nil && *v != "" {
			seg = hiveEscape(*v)
		}
		dir += hiveEscape(c) + "=" + seg + "/"
		pv[c] = v
	}
	key := dir + "part-00000-" + uuid.NewString() + "-c000.snappy.parquet"
	var meta pq.FileMeta
	// Owed: the commit that names the file flushes it before publishing
	// (store.PutOwed); until then nothing references it.
	err = putStream(ctx, w.st, key, store.PutOwed, func(out io.Writer) error {
		pw, err := layout.NewWriter(out)
		if err != nil {
			return err
		}
		if err := pw.Write(rows); err != nil {
			return err
		}
		meta, err = pw.Close()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delta: writing data file %s to table %s: %w", key, w.table, err)
	}
	stats, err := StatsJSON(meta, statsCols)
	if err != nil {
		return nil, err
	}
	return &Add{
		Path: EncodePath(key), PartitionValues: pv, Size: meta.Size,
		ModificationTime: w.opts.now().UnixMilli(), DataChange: true, Stats: stats,
	}, nil
}

// numIndexedCols is delta.dataSkippingNumIndexedCols (default 32; -1 = all).
func numIndexedCols(md *Metadata) int {
	if v, ok := md.Configuration["delta.dataSkippingNumIndexedCols"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return 32
}

// StringStatsPrefix is how many characters of a string column go into the
// min/max statistics (Spark's default).
const StringStatsPrefix = 32

// maxRune is appended to a truncated string maximum so that it still sorts
// at or after every value it stands for (Spark's tie-breaker).
const maxRune = "\U0010FFFF"

// StatsJSON renders per-file statistics in the Delta format from what the
// Parquet writer measured: numRecords, and for the first numIndexed leaf
// columns minValues/maxValues/nullCount, nested like the schema. Columns
// inside lists or maps are skipped; binary columns get only nullCount;
// strings are cut to a 32-character prefix (the max gets a tie-breaker, or
// is omitted when no safe bound exists); timestamps are millisecond UTC
// ISO strings with the max rounded up; values JSON cannot hold exactly
// (Inf, decimals beyond double precision) are omitted.
func StatsJSON(meta pq.FileMeta, numIndexed int) (string, error) {
	var minV, maxV, nulls []statLeaf
	indexed := 0
	for _, c := range meta.Columns {
		if c.Repeated {
			continue
		}
		if numIndexed >= 0 && indexed >= numIndexed {
			break
		}
		indexed++
		nulls = append(nulls, statLeaf{c.Path, c.NullCount})
		if c.Min == nil || c.Max == nil {
			continue
		}
		lo, hi, ok := statBounds(c)
		if !ok {
			continue
		}
		if lo != nil {
			minV = append(minV, statLeaf{c.Path, lo})
		}
		if hi != nil {
			maxV = append(maxV, statLeaf{c.Path, hi})
		}
	}
	// The members in encoding/json's map order, as before this was
	// appended by hand (jsonappend.go).
	b := make([]byte, 0, 64+48*len(meta.Columns))
	b = append(b, '{')
	var err error
	for _, m := range []struct {
		key    string
		leaves []statLeaf
	}{{"maxValues", maxV}, {"minValues", minV}, {"nullCount", nulls}} {
		if len(m.leaves) == 0 {
			continue
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		if b, err = appendNested(b, m.leaves); err != nil {
			return "", fmt.Errorf("delta: encoding stats: %w", err)
		}
		b = append(b, ',')
	}
	b = append(b, `"numRecords":`...)
	b = strconv.AppendInt(b, meta.NumRows, 10)
	b = append(b, '}')
	return string(b), nil
}

// statBounds converts one column's exact extremes into safe JSON bounds.
// A nil bound is omitted.
func statBounds(c pq.ColumnStats) (lo, hi any, ok bool) {
	switch mn := c.Min.(type) {
	case bool, int8, int16, int32, int64:
		return mn, c.Max, true
	case float32:
		mx := c.Max.(float32)
		if math.IsInf(float64(mn), 0) || math.IsInf(float64(mx), 0) {
			return nil, nil, false
		}
		return mn, mx, true
	case float64:
		mx := c.Max.(float64)
		if math.IsInf(mn, 0) || math.IsInf(mx, 0) {
			return nil, nil, false
		}
		return mn, mx, true
	case string:
		mx := c.Max.(string)
		if !utf8.ValidString(mn) || !utf8.ValidString(mx) {
			return nil, nil, false // JSON would replace bytes and break the bounds
		}
		return truncatePrefix(mn), truncateMax(mx), true
	case []byte:
		return nil, nil, false
	case pq.Date:
		return mn.String(), c.Max.(pq.Date).String(), true
	case time.Time:
		mx := c.Max.(time.Time)
		lo := mn.UTC().Truncate(time.Millisecond)
		hiT := mx.UTC()
		if t := hiT.Truncate(time.Millisecond); !t.Equal(hiT) {
			hiT = t.Add(time.Millisecond)
		}
		const layout = "2006-01-02T15:04:05.000Z"
		return lo.Format(layout), hiT.Format(layout), true
	case pq.Decimal:
		mx := c.Max.(pq.Decimal)
		if len(strings.TrimLeft(mn.Unscaled.String(), "-")) > 15 || len(strings.TrimLeft(mx.Unscaled.String(), "-")) > 15 {
			return nil, nil, false
		}
		return json.Number(mn.String()), json.Number(mx.String()), true
	}
	return nil, nil, false
}

func truncatePrefix(s string) string {
	if utf8.RuneCountInString(s) <= StringStatsPrefix {
		return s
	}
	n := 0
	for i := range s {
		if n == StringStatsPrefix {
			return s[:i]
		}
		n++
	}
	return s
}

// truncateMax returns a string of at most 32 characters plus a tie-breaker
// that sorts (bytewise, as Parquet and Spark compare UTF-8) at or after s,
// or nil if none exists.
func truncateMax(s string) any {
	p := truncatePrefix(s)
	if p == s {
		return s
	}
	candidate := p + maxRune
	if candidate < s {
		return nil
	}
	return candidate
}

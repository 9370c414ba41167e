package delta

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// ParsePartitionValue converts a partition value string from the log into
// the Go value pq uses for the column's type (see package pq). nil and ""
// are SQL NULL; the four-character string "null" is a real string value.
// Timestamps without a zone ("2021-09-08 11:11:11[.ffffff]") are read as
// UTC, as Delta Kernel does; ISO-8601 values with a zone are honored.
func ParsePartitionValue(v *string, t DataType) (any, error) {
	if v == nil || *v == "" {
		return nil, nil
	}
	s := *v
	bad := func(err error) (any, error) {
		return nil, fmt.Errorf("%w: partition value %q is not a valid %s: %v", ErrCorruptLog, s, t.TypeString(), err)
	}
	switch t := t.(type) {
	case *DecimalType:
		d, err := pq.ParseDecimal(s, t.Scale)
		if err != nil {
			return bad(err)
		}
		return d, nil
	case *PrimitiveType:
		switch t.Name {
		case TypeString:
			return s, nil
		case TypeBinary:
			return []byte(s), nil
		case TypeBoolean:
			switch strings.ToLower(s) {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			return bad(errors.New("want true or false"))
		case TypeLong, TypeInteger, TypeShort, TypeByte:
			bits := map[string]int{TypeLong: 64, TypeInteger: 32, TypeShort: 16, TypeByte: 8}[t.Name]
			n, err := strconv.ParseInt(s, 10, bits)
			if err != nil {
				return bad(err)
			}
			switch bits {
			case 64:
				return n, nil
			case 32:
				return int32(n), nil
			case 16:
				return int16(n), nil
			}
			return int8(n), nil
		case TypeFloat:
			f, err := strconv.ParseFloat(s, 32)
			if err != nil {
				return bad(err)
			}
			return float32(f), nil
		case TypeDouble:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return bad(err)
			}
			return f, nil
		case TypeDate:
			d, err := time.Parse("2006-01-02", s)
			if err != nil {
				return bad(err)
			}
			return pq.DateFromTime(d), nil
		case TypeTimestamp:
			ts, err := parsePartitionTimestamp(s)
			if err != nil {
				return bad(err)
			}
			return ts, nil
		}
	}
	return nil, fmt.Errorf("%w: partition column of type %s", ErrUnsupported, t.TypeString())
}

func parsePartitionTimestamp(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05Z07:00"} {
		if ts, err := time.Parse(layout, s); err == nil {
			return ts.UTC().Truncate(time.Microsecond), nil
		}
	}
	return time.Time{}, errors.New("want YYYY-MM-DD HH:MM:SS[.ffffff] or ISO-8601")
}

// FormatPartitionValue renders a Go value as a partition value string
// (nil for NULL): ISO-8601 UTC for timestamps, as the protocol recommends.
func FormatPartitionValue(v any) *string {
	var s string
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		s = x
	case []byte:
		s = string(x)
	case bool:
		s = strconv.FormatBool(x)
	case int8, int16, int32, int64, int:
		s = fmt.Sprint(x)
	case float32:
		s = strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case pq.Date:
		s = x.String()
	case time.Time:
		s = x.UTC().Format("2006-01-02T15:04:05.000000Z")
	case pq.Decimal:
		s = x.String()
	default:
		s = fmt.Sprint(x)
	}
	return &s
}

// ScanOptions select what Scan reads.
type ScanOptions struct {
	// Columns projects the table schema (nil: every column).
	Columns []string
	// BatchRows bounds the rows handed to fn at once (default 4096).
	BatchRows int
	// Files restricts the scan to these live files (nil: every live file).
	// The lake writer's MERGE reads only the files stats say may hold a key.
	Files []*Add
}

// Scan reads the live data files of the snapshot from st (the table's
// store) and calls fn with batches of rows. A row holds one value per
// selected column in table-schema order (see ScanColumns); partition
// columns come from add.partitionValues, typed per the schema, never from
// directory names; columns a file lacks read as null, and physical columns
// not in the schema are ignored.
func (s *Snapshot) Scan(ctx context.Context, st store.Store, opts ScanOptions, fn func(file *Add, rows []pq.Row) error) error {
	cols, err := s.ScanColumns(opts.Columns)
	if err != nil {
		return err
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = 4096
	}
	part := map[string]int{}
	for i, p := range s.metadata.PartitionColumns {
		part[p] = i
	}
	// The physical projection: selected non-partition columns.
	var physFields []pq.Field
	var physIdx []int // position in the output row
	for i, f := range cols {
		if _, ok := part[f.Name]; ok {
			continue
		}
		t, err := PQType(f.Type)
		if err != nil {
			return err
		}
		physFields = append(physFields, pq.Field{Name: f.Name, Type: t, Nullable: true})
		physIdx = append(physIdx, i)
	}
	want := pq.NewSchema(physFields...)
	files := opts.Files
	if files == nil {
		files = s.Files()
	}
	for _, add := range opts.Files {
		key, err := DecodePath(add.Path)
		if err != nil {
			return err
		}
		if _, ok := s.files[key]; !ok && !s.maybeBaseFile(key) {
			return fmt.Errorf("delta: table %s has no live file %q at version %d", s.table, key, s.version)
		}
	}
	for _, add := range files {
		if err := s.scanFile(ctx, st, add, cols, part, want, physIdx, batch, fn); err != nil {
			return fmt.Errorf("table %s: reading %s: %w", s.table, add.Path, err)
		}
	}
	return nil
}

// maybeBaseFile reports whether key may be a live file of a lean
// snapshot's base checkpoint (EachFile streams them; memory does not hold
// them to check against): not removed since.
func (s *Snapshot) maybeBaseFile(key string) bool {
	return s.hasLeanBase() && !s.leanRemoved[key]
}

// ScanColumns returns the fields a Scan with these columns yields, in order.
func (s *Snapshot) ScanColumns(columns []string) ([]StructField, error) {
	if columns == nil {
		return s.schema.Fields, nil
	}
	out := make([]StructField, 0, len(columns))
	for _, c := range columns {
		f := s.schema.Field(c)
		if f == nil {
			return nil, fmt.Errorf("delta: table %s has no column %q", s.table, c)
		}
		out = append(out, *f)
	}
	return out, nil
}

func (s *Snapshot) scanFile(ctx context.Context, st store.Store, add *Add, cols []StructField, part map[string]int, want *pq.Schema, physIdx []int, batch int, fn func(*Add, []pq.Row) error) error {
	partVals := make([]any, len(cols))
	for i, f := range cols {
		if _, ok := part[f.Name]; !ok {
			continue
		}
		raw, ok := add.PartitionValues[f.Name]
		if !ok {
			return fmt.Errorf("%w: no value for partition column %q", ErrCorruptLog, f.Name)
		}
		v, err := ParsePartitionValue(raw, f.Type)
		if err != nil {
			return err
		}
		partVals[i] = v
	}
	key, err := DecodePath(add.Path)
	if err != nil {
		return err
	}
	raw, err := st.Open(ctx, key)
	if err != nil {
		return err
	}
	defer raw.Close()
	obj := &readRecorder{Object: raw}
	f, err := pq.Open(obj, obj.Size())
	if err != nil {
		return obj.classify(err)
	}
	rows, err := f.RowsFor(want)
	if err != nil {
		return obj.classify(err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		phys, err := rows.Next(batch)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return obj.classify(err)
		}
		out := make([]pq.Row, len(phys))
		for r, pr := range phys {
			row := make(pq.Row, len(cols))
			copy(row, partVals)
			for j, idx := range physIdx {
				row[idx] = pr[j]
			}
			out[r] = row
		}
		if err := fn(add, out); err != nil {
			return err
		}
	}
}

// JSONValue renders a scanned value the way the conformance corpus writes
// expected rows: numbers as numbers, decimals as strings at their scale,
// dates as YYYY-MM-DD, timestamps as UTC ISO-8601 with Z, binary as
// base64, structs as objects, maps as objects keyed by the key's string.
func JSONValue(v any, t DataType) any {
	if v == nil {
		return nil
	}
	switch t := t.(type) {
	case *StructType:
		vals, _ := v.([]any)
		out := map[string]any{}
		for i, f := range t.Fields {
			if i < len(vals) {
				out[f.Name] = JSONValue(vals[i], f.Type)
			}
		}
		return out
	case *ArrayType:
		vals, _ := v.([]any)
		out := make([]any, len(vals))
		for i, e := range vals {
			out[i] = JSONValue(e, t.ElementType)
		}
		return out
	case *MapType:
		entries, _ := v.([]pq.MapEntry)
		out := map[string]any{}
		for _, e := range entries {
			out[mapKeyString(e.Key)] = JSONValue(e.Value, t.ValueType)
		}
		return out
	}
	switch x := v.(type) {
	case int8:
		return float64(x)
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float32:
		return float64(x)
	case pq.Decimal:
		return x.String()
	case pq.Date:
		return x.String()
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	}
	return v
}

// mapKeyString renders a map key like the JVM does ("0.0" for a float zero).
func mapKeyString(k any) string {
	switch x := k.(type) {
	case float32:
		return javaFloat(float64(x), 32)
	case float64:
		return javaFloat(x, 64)
	case string:
		return x
	case pq.Decimal:
		return x.String()
	}
	return fmt.Sprint(JSONValueScalar(k))
}

// JSONValueScalar renders a scalar without type information.
func JSONValueScalar(v any) any {
	switch x := v.(type) {
	case pq.Date, pq.Decimal:
		return fmt.Sprint(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}

func javaFloat(f float64, bits int) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, bits)
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// ErrCorruptData marks a data file whose bytes were read without error but
// do not decode as the Parquet file the log says it is: the file's fault
// (a finding), not the store's (an outage to retry).
var ErrCorruptData = errors.New("corrupt Parquet data file")

// readRecorder remembers whether reading the object itself failed, so a
// decode error can be told from a store error.
type readRecorder struct {
	store.Object
	readErr bool
}

func (r *readRecorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Object.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		r.readErr = true
	}
	return n, err
}

// classify wraps a Parquet error as ErrCorruptData unless the store failed
// underneath it.
func (r *readRecorder) classify(err error) error {
	if r.readErr || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrCorruptData, err)
}

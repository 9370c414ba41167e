package pq

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func writeFile(t testing.TB, s *Schema, opts Options, rows []Row) ([]byte, FileMeta) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, opts)
	require.NoError(t, err)
	require.NoError(t, w.Write(rows))
	meta, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), meta.Size)
	return buf.Bytes(), meta
}

func readBytes(t testing.TB, b []byte, cols ...string) (*File, []Row) {
	t.Helper()
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	rs, err := f.Rows(cols...)
	require.NoError(t, err)
	rows, err := rs.ReadAll()
	require.NoError(t, err)
	return f, rows
}

func mustDec(t testing.TB, s string, scale int) Decimal {
	d, err := ParseDecimal(s, scale)
	require.NoError(t, err)
	return d
}

func allTypesSchema() *Schema {
	return NewSchema(
		Nullable("b", Boolean),
		Nullable("i8", Int8),
		Nullable("i16", Int16),
		Nullable("i32", Int32),
		Required("i64", Int64),
		Nullable("f32", Float),
		Nullable("f64", Double),
		Nullable("s", String),
		Nullable("bin", Binary),
		Nullable("d", DateType),
		Nullable("ts", Timestamp),
		Nullable("ntz", TimestampNTZ),
		Nullable("dec5", DecimalOf(5, 2)),
		Nullable("dec15", DecimalOf(15, 3)),
		Nullable("dec38", DecimalOf(38, 10)),
		Nullable("st", StructOf(Nullable("x", Int64), Required("y", String), Nullable("z", StructOf(Nullable("q", Int32))))),
		Nullable("l", ListOf(Int64, true)),
		Nullable("ll", ListOf(ListOf(String, true), true)),
		Nullable("ls", ListOf(StructOf(Nullable("a", Int32), Nullable("b", ListOf(Int32, false))), true)),
		Nullable("m", MapOf(String, Int32, true)),
		Nullable("ms", MapOf(Int64, StructOf(Nullable("v", String)), true)),
	)
}

func TestRoundTripEveryTypeWithNullsAndExtremes(t *testing.T) {
	t.Parallel()
	s := allTypesSchema()
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	early := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := []Row{
		{
			true, int8(-128), int16(32767), int32(math.MinInt32), int64(math.MaxInt64),
			float32(1.5), math.Inf(-1), "héllo", []byte{0, 1, 2}, DateOf(2024, 2, 29),
			time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), time.Date(2020, 1, 1, 8, 9, 10, 1000, time.UTC),
			mustDec(t, "-999.99", 2), mustDec(t, "123456789012.345", 3), mustDec(t, "-9999999999999999999999999999.9999999999", 10),
			[]any{int64(1), "y", []any{int32(7)}}, []any{int64(1), nil, int64(3)},
			[]any{[]any{"a", ""}, []any{}, nil}, []any{[]any{int32(1), []any{int32(2), int32(3)}}, nil, []any{nil, []any{}}},
			[]MapEntry{{Key: "k", Value: int32(1)}, {Key: "n", Value: nil}}, []MapEntry{{Key: int64(5), Value: []any{"v"}}, {Key: int64(6), Value: nil}},
		},
		{
			nil, nil, nil, nil, int64(math.MinInt64),
			nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil,
		},
		{
			false, int8(127), int16(-32768), int32(math.MaxInt32), int64(0),
			float32(math.NaN()), 0.0, "", []byte{}, DateOf(1, 1, 1),
			far, early,
			mustDec(t, "0.01", 2), mustDec(t, "0", 3), mustDec(t, "99999999999999999999999999.9999999999", 10),
			[]any{nil, "", nil}, []any{}, []any{}, []any{}, []MapEntry{}, []MapEntry{},
		},
		{
			nil, int8(0), int16(0), int32(0), int64(42),
			float32(-0.5), math.MaxFloat64, "zzz", []byte{0xff}, DateOf(1969, 12, 31),
			early, far,
			nil, nil, nil,
			[]any{int64(-1), "a", nil}, []any{nil}, []any{nil}, []any{nil}, []MapEntry{{Key: "", Value: int32(-1)}}, nil,
		},
	}
	for _, opts := range []Options{{}, {Compression: Zstd}, {Compression: Uncompressed}} {
		b, meta := writeFile(t, s, opts, rows)
		require.Equal(t, int64(4), meta.NumRows)
		f, got := readBytes(t, b)
		require.Equal(t, s.String(), f.Schema().String())
		require.Len(t, got, len(rows))
		for i := range rows {
			for j := range rows[i] {
				want := rows[i][j]
				if fv, ok := want.(float32); ok && math.IsNaN(float64(fv)) {
					require.True(t, math.IsNaN(float64(got[i][j].(float32))))
					continue
				}
				require.Equal(t, normalize(want), normalize(got[i][j]), "row %d column %s (%s)", i, s.Fields[j].Name, opts.Compression)
			}
		}
	}
}

// normalize renders decimals as strings so big.Int internals do not matter.
func normalize(v any) any {
	switch x := v.(type) {
	case Decimal:
		return "dec:" + x.String()
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case []MapEntry:
		out := make([]MapEntry, len(x))
		for i := range x {
			out[i] = MapEntry{Key: normalize(x[i].Key), Value: normalize(x[i].Value)}
		}
		return out
	}
	return v
}

func TestStatsAreExact(t *testing.T) {
	t.Parallel()
	s := NewSchema(
		Nullable("s", String), Nullable("n", Int64), Nullable("f", Double), Nullable("ts", Timestamp),
		Nullable("bin", Binary), Nullable("dec", DecimalOf(20, 2)), Nullable("st", StructOf(Nullable("x", Int32))),
		Nullable("d", DateType), Nullable("b", Boolean), Nullable("allnull", String),
	)
	long := string(bytes.Repeat([]byte("z"), 100))
	t1 := time.Date(2020, 1, 1, 0, 0, 0, 1000, time.UTC)
	t2 := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := []Row{
		{"b", int64(5), math.NaN(), t2, []byte{2}, "10.5", []any{int32(3)}, DateOf(2020, 1, 1), true, nil},
		{long, int64(-3), 1.25, t1, []byte{1, 9}, "-0.01", nil, DateOf(1960, 1, 1), false, nil},
		{"", nil, nil, nil, nil, nil, []any{nil}, nil, nil, nil},
	}
	// Write in two calls and with tiny row groups to check stats span row groups.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, Options{RowGroupRows: 1})
	require.NoError(t, err)
	require.NoError(t, w.Write(rows[:1]))
	require.NoError(t, w.Write(rows[1:]))
	meta, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, int64(3), meta.NumRows)
	f, got := readBytes(t, buf.Bytes())
	require.Equal(t, 3, f.NumRowGroups())
	require.Len(t, got, 3)

	c := meta.Column("s")
	require.Equal(t, "", c.Min)
	require.Equal(t, long, c.Max)
	require.Equal(t, int64(0), c.NullCount)
	c = meta.Column("n")
	require.Equal(t, int64(-3), c.Min)
	require.Equal(t, int64(5), c.Max)
	require.Equal(t, int64(1), c.NullCount)
	c = meta.Column("f")
	require.Equal(t, 1.25, c.Min)
	require.Equal(t, 1.25, c.Max)
	c = meta.Column("ts")
	require.Equal(t, t1, c.Min)
	require.Equal(t, t2, c.Max)
	c = meta.Column("bin")
	require.Equal(t, []byte{1, 9}, c.Min)
	require.Equal(t, []byte{2}, c.Max)
	c = meta.Column("dec")
	require.Equal(t, "-0.01", c.Min.(Decimal).String())
	require.Equal(t, "10.50", c.Max.(Decimal).String())
	c = meta.Column("st", "x")
	require.Equal(t, int32(3), c.Min)
	require.Equal(t, int64(2), c.NullCount) // null struct and null field
	c = meta.Column("d")
	require.Equal(t, DateOf(1960, 1, 1), c.Min)
	c = meta.Column("b")
	require.Equal(t, false, c.Min)
	require.Equal(t, true, c.Max)
	c = meta.Column("allnull")
	require.Nil(t, c.Min)
	require.Equal(t, int64(3), c.NullCount)
}

func TestProjectionMissingAndExtraColumns(t *testing.T) {
	t.Parallel()
	s := NewSchema(Required("a", Int64), Nullable("_change_type", String), Nullable("b", StructOf(Nullable("x", Int64), Nullable("y", String))))
	b, _ := writeFile(t, s, Options{}, []Row{
		{int64(1), nil, []any{int64(10), "p"}},
		{int64(2), nil, nil},
	})
	_, rows := readBytes(t, b, "b", "new_col", "a")
	require.Equal(t, []Row{{[]any{int64(10), "p"}, nil, int64(1)}, {nil, nil, int64(2)}}, rows)

	// Nested projection: a missing nested field reads as null, the struct's
	// own nulls survive even when no requested field exists in the file.
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	rs, err := f.RowsFor(NewSchema(Nullable("b", StructOf(Nullable("zz", Int64)))))
	require.NoError(t, err)
	got, err := rs.ReadAll()
	require.NoError(t, err)
	require.Equal(t, []Row{{[]any{nil}}, {nil}}, got)
	rs, err = f.RowsFor(NewSchema(Nullable("b", StructOf(Nullable("y", nil), Nullable("zz", Int64)))))
	require.NoError(t, err)
	got, err = rs.ReadAll()
	require.NoError(t, err)
	require.Equal(t, []Row{{[]any{"p", nil}}, {nil}}, got)

	_, err = f.RowsFor(NewSchema(Nullable("a", StructOf(Nullable("x", Int64)))))
	require.ErrorContains(t, err, "column a")
}

func TestProjectionInsideListsAndMaps(t *testing.T) {
	t.Parallel()
	elem := StructOf(Nullable("a", Int32), Nullable("b", String))
	s := NewSchema(Nullable("ls", ListOf(elem, true)), Nullable("m", MapOf(String, elem, true)))
	b, _ := writeFile(t, s, Options{}, []Row{
		{[]any{[]any{int32(1), "x"}, nil, []any{nil, "y"}}, []MapEntry{{Key: "k", Value: []any{int32(2), "z"}}, {Key: "n", Value: nil}}},
		{nil, nil},
		{[]any{}, []MapEntry{}},
	})
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	want := StructOf(Nullable("b", nil), Nullable("gone", Int64))
	rs, err := f.RowsFor(NewSchema(Nullable("m", MapOf(String, want, true)), Nullable("ls", ListOf(want, true))))
	require.NoError(t, err)
	got, err := rs.ReadAll()
	require.NoError(t, err)
	require.Equal(t, []Row{
		{[]MapEntry{{Key: "k", Value: []any{"z", nil}}, {Key: "n", Value: nil}}, []any{[]any{"x", nil}, nil, []any{"y", nil}}},
		{nil, nil},
		{[]MapEntry{}, []any{}},
	}, got)

	// Only absent fields requested: the element structs' nulls still show.
	rs, err = f.RowsFor(NewSchema(Nullable("ls", ListOf(StructOf(Nullable("gone", Int64)), true))))
	require.NoError(t, err)
	got, err = rs.ReadAll()
	require.NoError(t, err)
	require.Equal(t, []Row{{[]any{[]any{nil}, nil, []any{nil}}}, {nil}, {[]any{}}}, got)
}

// TestWriterMemoryStaysFlat writes many row groups of incompressible 2 KiB
// bodies and checks that the live heap after each Write stays near one row
// group, not the whole file.
func TestWriterMemoryStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60 MiB")
	}
	s := NewSchema(Required("id", Int64), Required("body", Binary))
	w, err := NewWriter(&discard{}, s, Options{RowGroupBytes: 4 << 20})
	require.NoError(t, err)
	body := make([]byte, 2048)
	var ms runtime.MemStats
	var peak uint64
	for batch := 0; batch < 30; batch++ {
		rows := make([]Row, 1000)
		for i := range rows {
			body[0], body[1] = byte(i), byte(batch)
			rows[i] = Row{int64(batch*1000 + i), body} // the writer must copy: body is reused
		}
		require.NoError(t, w.Write(rows))
		require.Less(t, w.BufferedBytes(), int64(4<<20)+4096, "a row group is flushed once it reaches RowGroupBytes")
		require.Positive(t, w.WrittenBytes())
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	meta, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, int64(30_000), meta.NumRows)
	t.Logf("peak live heap %.1f MiB", float64(peak)/(1<<20))
	require.Less(t, peak, uint64(40<<20), "heap grew with the file (60 MiB of bodies, 4 MiB row groups)")
}

func TestZeroRowFile(t *testing.T) {
	t.Parallel()
	b, meta := writeFile(t, allTypesSchema(), Options{}, nil)
	require.Equal(t, int64(0), meta.NumRows)
	f, rows := readBytes(t, b)
	require.Equal(t, int64(0), f.NumRows())
	require.Empty(t, rows)
}

func TestWriterRejectsValuesThatDoNotFit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		typ  *Type
		v    any
		msg  string
	}{
		{"byte overflow", Int8, 300, "does not fit"},
		{"wrong go type", Int64, "1", "needs an integer"},
		{"decimal too precise", DecimalOf(5, 2), "1.234", "fractional digits"},
		{"decimal too large", DecimalOf(5, 2), "1234.5", "does not fit"},
		{"timestamp needs time", Timestamp, int64(1), "time.Time"},
		{"required null", nil, nil, "not nullable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := Nullable("c", tc.typ)
			if tc.typ == nil {
				f = Required("c", String)
			}
			w, err := NewWriter(&bytes.Buffer{}, NewSchema(f), Options{})
			require.NoError(t, err)
			require.ErrorContains(t, w.Write([]Row{{tc.v}}), tc.msg)
		})
	}
}

func TestDecimalTwosComplement(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "1", "-1", "127", "-128", "128", "-129", "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999"} {
		u, ok := new(big.Int).SetString(s, 10)
		require.True(t, ok)
		require.Equal(t, s, fromTwosComplement(twosComplement(u, 16)).String())
	}
	require.Equal(t, 16, decimalBytes(38))
	require.Equal(t, 9, decimalBytes(20))
	require.Equal(t, 4, decimalBytes(9))
}

type failingWriter struct{ left int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n := f.left
		f.left = 0
		return n, errors.New("disk full")
	}
	f.left -= len(p)
	return len(p), nil
}

// TestWriterSurfacesSinkErrors: a failing io.Writer yields an error from Write
// or Close, never a panic and never a FileMeta for a file that is not whole.
func TestWriterSurfacesSinkErrors(t *testing.T) {
	t.Parallel()
	rows, _ := bronzeRows(2000)
	for _, budget := range []int{0, 3, 100, 10_000, 200_000} {
		t.Run(fmt.Sprintf("fails after %d bytes", budget), func(t *testing.T) {
			t.Parallel()
			w, err := NewWriter(&failingWriter{left: budget}, bronzeSchema(), Options{RowGroupRows: 500})
			if err != nil {
				require.ErrorContains(t, err, "disk full")
				return
			}
			werr := w.Write(rows)
			meta, cerr := w.Close()
			require.True(t, werr != nil || cerr != nil, "the sink failed but the writer did not say so")
			require.Zero(t, meta.NumRows)
		})
	}
}

// TestBadRowIsDroppedWhole: a row failing in its last column, after its
// earlier (nested) columns were already shredded, leaves no trace — not in the
// data and not in the statistics — and the writer carries on.
func TestBadRowIsDroppedWhole(t *testing.T) {
	t.Parallel()
	s := NewSchema(
		Nullable("n", Int64), Nullable("s", String), Nullable("l", ListOf(StructOf(Nullable("a", Int32)), true)),
		Nullable("m", MapOf(String, Int64, true)), Nullable("b", Binary), Required("last", Int8),
	)
	good := func(i int) Row {
		return Row{int64(i), fmt.Sprint("v", i), []any{[]any{int32(i)}}, []MapEntry{{Key: "k", Value: int64(i)}}, []byte{byte(i)}, int8(i)}
	}
	bad := Row{int64(-1 << 60), "", []any{[]any{int32(-7)}, nil}, []MapEntry{{Key: "bad", Value: nil}}, []byte{}, 1000} // 1000 overflows int8
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, Options{})
	require.NoError(t, err)
	batch := []Row{good(1), good(2), bad, good(3)}
	err = w.Write(batch)
	var re *RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Index)
	require.ErrorContains(t, err, "does not fit in a byte")
	require.NoError(t, w.Write(batch[re.Index+1:]))
	err = w.Write([]Row{{int64(4), "v4", nil, nil, nil}}) // wrong arity
	require.ErrorAs(t, err, &re, "a short row is a RowError, not a poisoned writer")
	meta, err := w.Close()
	require.NoError(t, err)
	require.Equal(t, int64(3), meta.NumRows)
	_, got := readBytes(t, buf.Bytes())
	require.Equal(t, []Row{good(1), good(2), good(3)}, got)
	require.Equal(t, int64(1), meta.Column("n").Min)
	require.Equal(t, "v1", meta.Column("s").Min)
	require.Equal(t, int32(1), meta.Column("l", "element", "a").Min)
	require.Equal(t, int64(0), meta.Column("m", "value").NullCount)
	require.Equal(t, []byte{1}, meta.Column("b").Min)
}

package pq

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeBothPaths writes rows through the small-file path and through the
// arrow-go path of the same layout.
func writeBothPaths(t testing.TB, s *Schema, opts Options, rows []Row) (small, arrow []byte, sm, am FileMeta) {
	t.Helper()
	l, err := NewLayout(s, opts)
	require.NoError(t, err)
	require.NotNil(t, l.fast, "the small path must cover this schema")
	old := *l
	old.fast = nil
	write := func(l *Layout) ([]byte, FileMeta) {
		var buf bytes.Buffer
		w, err := l.NewWriter(&buf)
		require.NoError(t, err)
		require.NoError(t, w.Write(rows))
		m, err := w.Close()
		require.NoError(t, err)
		require.Equal(t, int64(buf.Len()), m.Size)
		return buf.Bytes(), m
	}
	small, sm = write(l)
	arrow, am = write(&old)
	return
}

// requireSameFile checks that both files are the same bytes, hold the same
// rows read back by arrow-go's file reader, and carry the same footer
// statistics and FileMeta.
func requireSameFile(t testing.TB, small, arrow []byte, sm, am FileMeta) {
	t.Helper()
	if !bytes.Equal(small, arrow) {
		i := 0
		for i < len(small) && i < len(arrow) && small[i] == arrow[i] {
			i++
		}
		t.Fatalf("the small path wrote %d bytes, arrow-go %d; first difference at byte %d:\nsmall %x\narrow %x",
			len(small), len(arrow), i, small[max(0, i-8):min(len(small), i+24)], arrow[max(0, i-8):min(len(arrow), i+24)])
	}
	require.Equal(t, normalizeMeta(am), normalizeMeta(sm))
	fs, rs := readBytes(t, small)
	fa, ra := readBytes(t, arrow)
	require.Equal(t, len(ra), len(rs))
	for i := range ra {
		// compared as text: NaN != NaN
		require.True(t, fmt.Sprint(normalize(ra[i])) == fmt.Sprint(normalize(rs[i])), "row %d differs", i)
	}
	ms, ma := fs.r.MetaData(), fa.r.MetaData()
	require.Equal(t, ma.NumRowGroups(), ms.NumRowGroups())
	for g := 0; g < ma.NumRowGroups(); g++ {
		for c := 0; c < ma.Schema.NumColumns(); c++ {
			ca, err := ma.RowGroup(g).ColumnChunk(c)
			require.NoError(t, err)
			cs, err := ms.RowGroup(g).ColumnChunk(c)
			require.NoError(t, err)
			sa, err := ca.Statistics()
			require.NoError(t, err)
			ss, err := cs.Statistics()
			require.NoError(t, err)
			if sa == nil {
				require.Nil(t, ss)
				continue
			}
			require.Equal(t, sa.HasMinMax(), ss.HasMinMax(), "column %d", c)
			require.Equal(t, sa.NullCount(), ss.NullCount(), "column %d", c)
			require.Equal(t, sa.EncodeMin(), ss.EncodeMin(), "column %d min", c)
			require.Equal(t, sa.EncodeMax(), ss.EncodeMax(), "column %d max", c)
		}
	}
}

func normalizeMeta(m FileMeta) string { return fmt.Sprintf("%d %d %v", m.NumRows, m.Size, m.Columns) }

func TestSmallPathFileEqualsArrowPath(t *testing.T) {
	t.Parallel()
	s := allTypesSchema()
	r := rand.New(rand.NewPCG(7, 7))
	randRows := func(n int) []Row {
		rows := make([]Row, n)
		for i := range rows {
			row := make(Row, len(s.Fields))
			for j, f := range s.Fields {
				row[j] = randValue(r, f.Type, f.Nullable)
			}
			rows[i] = row
		}
		return rows
	}
	allNull := make(Row, len(s.Fields))
	allNull[4] = int64(0)
	emptyNested := Row{nil, nil, nil, nil, int64(1), nil, nil, "", []byte{}, nil, nil, nil, nil, nil, nil,
		[]any{nil, "", []any{nil}}, []any{}, []any{[]any{}, nil, []any{nil, ""}}, []any{nil, []any{nil, []any{}}},
		[]MapEntry{}, []MapEntry{{Key: int64(1), Value: nil}, {Key: int64(2), Value: []any{nil}}}}
	cases := map[string][]Row{
		"zero rows":                  nil,
		"one row of nulls":           {allNull},
		"empty lists, maps, strings": {emptyNested, allNull, emptyNested},
		"3 random rows":              randRows(3),
		"10 random rows":             randRows(10),
		"64 random rows":             randRows(64),
	}
	for name, rows := range cases {
		for _, c := range []Compression{Snappy, Zstd, Uncompressed} {
			t.Run(fmt.Sprintf("%s/%s", name, c), func(t *testing.T) {
				small, arrow, sm, am := writeBothPaths(t, s, Options{Compression: c}, rows)
				requireSameFile(t, small, arrow, sm, am)
			})
		}
	}
}

// TestSmallPathStatisticsEdgeCases: float zeros and NaN, booleans, values
// longer than the 4096-byte statistics limit, empty strings as the minimum,
// negative decimals.
func TestSmallPathStatisticsEdgeCases(t *testing.T) {
	t.Parallel()
	s := NewSchema(Nullable("f", Float), Nullable("d", Double), Nullable("b", Boolean), Nullable("s", String),
		Nullable("dec", DecimalOf(38, 2)), Nullable("l", ListOf(Double, true)))
	nan32, nan := float32(math.NaN()), math.NaN()
	big := strings.Repeat("z", 5000)
	cases := map[string][]Row{
		"zeros":        {{float32(0), 0.0, true, "", mustDec(t, "0", 2), []any{0.0}}, {float32(math.Copysign(0, -1)), math.Copysign(0, -1), true, "a", mustDec(t, "-1", 2), []any{}}},
		"only NaN":     {{nan32, nan, false, "x", nil, []any{nan}}, {nan32, nan, false, "y", nil, nil}},
		"NaN and more": {{nan32, nan, false, big, mustDec(t, "-99999999999999999999999999999999999.99", 2), []any{nan, -1.5}}, {float32(2), 3.0, true, "", mustDec(t, "5.5", 2), []any{math.Inf(1)}}},
		"long max":     {{nil, nil, nil, "a", nil, nil}, {nil, nil, nil, big, nil, nil}},
		"long min":     {{nil, nil, nil, big, nil, nil}},
	}
	for name, rows := range cases {
		t.Run(name, func(t *testing.T) {
			small, arrow, sm, am := writeBothPaths(t, s, Options{}, rows)
			requireSameFile(t, small, arrow, sm, am)
		})
	}
}

// randSchema returns a random schema of up to 6 top-level fields, nested
// up to depth 3.
func randSchema(r *rand.Rand) *Schema {
	var typ func(depth int) *Type
	leaves := []*Type{Boolean, Int8, Int16, Int32, Int64, Float, Double, String, Binary, DateType, Timestamp, TimestampNTZ}
	typ = func(depth int) *Type {
		k := r.IntN(10)
		if depth >= 3 || k < 6 {
			if r.IntN(8) == 0 {
				return DecimalOf(1+r.IntN(38), 0)
			}
			return leaves[r.IntN(len(leaves))]
		}
		switch k {
		case 6, 7:
			n := 1 + r.IntN(3)
			fs := make([]Field, n)
			for i := range fs {
				fs[i] = Field{Name: fmt.Sprintf("f%d", i), Type: typ(depth + 1), Nullable: r.IntN(2) == 0}
			}
			return StructOf(fs...)
		case 8:
			return ListOf(typ(depth+1), r.IntN(2) == 0)
		}
		return MapOf(leaves[r.IntN(len(leaves))], typ(depth+1), r.IntN(2) == 0)
	}
	n := 1 + r.IntN(6)
	fs := make([]Field, n)
	for i := range fs {
		fs[i] = Field{Name: fmt.Sprintf("c%d", i), Type: typ(0), Nullable: r.IntN(2) == 0}
	}
	return NewSchema(fs...)
}

// TestSmallPathRandomSchemasEqualArrowPath: random schemas and rows (0 to 64
// rows, nulls at every level) give the same file through both paths.
func TestSmallPathRandomSchemasEqualArrowPath(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 13))
	for i := 0; i < 300; i++ {
		s := randSchema(r)
		rows := make([]Row, r.IntN(65))
		for j := range rows {
			row := make(Row, len(s.Fields))
			for k, f := range s.Fields {
				row[k] = randValue(r, f.Type, f.Nullable)
			}
			rows[j] = row
		}
		opts := Options{Compression: Compression(r.IntN(3))}
		small, arrow, sm, am := writeBothPaths(t, s, opts, rows)
		if !bytes.Equal(small, arrow) {
			t.Logf("schema %s, %d rows, %s", s, len(rows), opts.Compression)
		}
		requireSameFile(t, small, arrow, sm, am)
	}
}

// FuzzSmallPathEqualsArrowPath: a seed drives the schema and the rows.
func FuzzSmallPathEqualsArrowPath(f *testing.F) {
	for i := uint64(0); i < 8; i++ {
		f.Add(i, uint8(i*9))
	}
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		s := randSchema(r)
		rows := make([]Row, int(n)%65)
		for j := range rows {
			row := make(Row, len(s.Fields))
			for k, f := range s.Fields {
				row[k] = randValue(r, f.Type, f.Nullable)
			}
			rows[j] = row
		}
		small, arrow, sm, am := writeBothPaths(t, s, Options{Compression: Compression(seed % 3)}, rows)
		requireSameFile(t, small, arrow, sm, am)
	})
}

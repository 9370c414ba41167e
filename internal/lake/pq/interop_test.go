package pq

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWriteInteropFiles writes sample files for checking with other engines
// (docs/parquet.md says how DuckDB was run on them). It only runs when
// OML_PQ_INTEROP_DIR names an output directory.
func TestWriteInteropFiles(t *testing.T) {
	dir := os.Getenv("OML_PQ_INTEROP_DIR")
	if dir == "" {
		t.Skip("set OML_PQ_INTEROP_DIR to write interop sample files")
	}
	rows := []Row{
		{
			true, int8(-128), int16(32767), int32(math.MinInt32), int64(math.MaxInt64),
			float32(1.5), -2.25, "héllo", []byte{0, 1, 2}, DateOf(2024, 2, 29),
			time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), time.Date(2020, 1, 1, 8, 9, 10, 1000, time.UTC),
			mustDec(t, "-999.99", 2), mustDec(t, "123456789012.345", 3), mustDec(t, "-9999999999999999999999999999.9999999999", 10),
			[]any{int64(1), "y", []any{int32(7)}}, []any{int64(1), nil, int64(3)},
			[]any{[]any{"a", ""}, []any{}, nil}, []any{[]any{int32(1), []any{int32(2), int32(3)}}, nil},
			[]MapEntry{{Key: "k", Value: int32(1)}, {Key: "n", Value: nil}}, []MapEntry{{Key: int64(5), Value: []any{"v"}}},
		},
		{
			nil, nil, nil, nil, int64(math.MinInt64),
			nil, nil, nil, nil, nil,
			time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil,
		},
		{
			false, int8(127), int16(-32768), int32(math.MaxInt32), int64(0),
			float32(0), 0.0, "", []byte{}, DateOf(1, 1, 1),
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), nil,
			mustDec(t, "0.01", 2), mustDec(t, "0", 3), mustDec(t, "99999999999999999999999999.9999999999", 10),
			[]any{nil, "", nil}, []any{}, []any{}, []any{}, []MapEntry{}, []MapEntry{},
		},
	}
	for _, c := range []Compression{Snappy, Zstd} {
		b, _ := writeFile(t, allTypesSchema(), Options{Compression: c}, rows)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "alltypes-"+c.String()+".parquet"), b, 0o644))
	}
	br, _ := bronzeRows(1000)
	b, _ := writeFile(t, bronzeSchema(), Options{}, br)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bronze.parquet"), b, 0o644))
}

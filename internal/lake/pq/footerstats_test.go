package pq

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/stretchr/testify/require"
)

// TestFooterStatsBoundTheValues guards the Parquet footer statistics other
// engines prune with (DuckDB skips row groups on them): for every string
// column chunk they must bound the values actually stored. arrow-go uses nil
// as "no value" in its byte-array statistics, so an empty string that is the
// smallest value of a page could be dropped from the column chunk's min.
func TestFooterStatsBoundTheValues(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"empty first page":        append(repeat("", 1500), repeat("b", 1500)...),
		"empty later page":        append(repeat("b", 1500), repeat("", 1500)...),
		"empty mixed":             {"x", "", "a", "", "zz"},
		"only empty":              repeat("", 3000),
		"empty then larger":       append(append(repeat("", 1100), repeat("c", 1100)...), repeat("a", 1100)...),
		"unique with empty first": append(uniques("u", 1500, true), uniques("b", 1500, false)...),
		"unique with empty later": append(uniques("u", 1500, false), uniques("b", 1500, true)...),
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rows := make([]Row, len(vals))
			for i, v := range vals {
				rows[i] = Row{v}
			}
			b, meta := writeFile(t, NewSchema(Nullable("s", String)), Options{PageBytes: 256, RowGroupRows: 2000}, rows)
			exactMin := meta.Column("s").Min.(string)
			f, err := Open(bytes.NewReader(b), int64(len(b)))
			require.NoError(t, err)
			md := f.r.MetaData()
			for i := 0; i < md.NumRowGroups(); i++ {
				cc, err := md.RowGroup(i).ColumnChunk(0)
				require.NoError(t, err)
				set, err := cc.StatsSet()
				require.NoError(t, err)
				if !set {
					continue
				}
				st, err := cc.Statistics()
				require.NoError(t, err)
				bs, ok := st.(*metadata.ByteArrayStatistics)
				require.True(t, ok)
				if !bs.HasMinMax() {
					continue
				}
				// The row group's true minimum.
				lo, hi := i*2000, min((i+1)*2000, len(vals))
				rgMin := vals[lo]
				for _, v := range vals[lo:hi] {
					rgMin = min(rgMin, v)
				}
				require.LessOrEqual(t, string(bs.Min()), rgMin, fmt.Sprintf("row group %d footer min", i))
				require.GreaterOrEqual(t, rgMin, exactMin)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// uniques returns n distinct strings with the prefix; with empties, every
// other one is "" so pages hold both.
func uniques(prefix string, n int, empties bool) []string {
	out := make([]string, n)
	for i := range out {
		if empties && i%2 == 0 {
			continue
		}
		out[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return out
}

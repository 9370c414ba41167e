package pq

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type manifestEntry struct {
	Dir            string           `json:"dir"`
	Expect         string           `json:"expect"`
	Sample         []map[string]any `json:"expected_rows_sample"`
	DataFiles      *bool            `json:"data_files_present"`
	PartitionCols  []string         `json:"partition_columns"`
	ExpectedFields []string         `json:"-"`
}

// TestGoldenSampleRowsDecode checks, for every table of the corpus whose data
// files are shipped, that each expected sample row (restricted to the columns
// stored in the data files) equals some row decoded from the table's Parquet
// files. All files on disk are read, live or not: choosing the live ones is the
// Delta layer's job, and a live row is always among them.
func TestGoldenSampleRowsDecode(t *testing.T) {
	t.Parallel()
	root := goldenDir(t)
	raw, err := os.ReadFile(filepath.Join(root, "MANIFEST.json"))
	require.NoError(t, err)
	var entries []manifestEntry
	require.NoError(t, json.Unmarshal(raw, &entries))
	data, _ := goldenParquetFiles(t)
	checkedTables := 0
	for _, e := range entries {
		if len(e.Sample) == 0 || (e.DataFiles != nil && !*e.DataFiles) {
			continue
		}
		var got []map[string]any
		fileCols := map[string]bool{}
		for _, p := range data {
			if !strings.HasPrefix(p, filepath.Join(root, e.Dir)+string(filepath.Separator)) {
				continue
			}
			f, rows := readFileRows(t, p)
			s := f.Schema()
			for _, fl := range s.Fields {
				fileCols[fl.Name] = true
			}
			for _, r := range rows {
				m := map[string]any{}
				for i, fl := range s.Fields {
					m[fl.Name] = render(t, r[i], fl.Type)
				}
				got = append(got, m)
			}
		}
		matchedCols := 0
		for _, want := range e.Sample {
			proj := map[string]any{}
			for k, v := range want {
				if fileCols[k] {
					proj[k] = canonicalExpected(v)
				}
			}
			if len(proj) == 0 {
				continue // column-mapped tables store physical names only
			}
			matchedCols += len(proj)
			wantJSON := mustJSON(t, proj)
			found := false
			for _, g := range got {
				sub := map[string]any{}
				for k := range proj {
					sub[k] = g[k]
				}
				if mustJSON(t, sub) == wantJSON {
					found = true
					break
				}
			}
			require.True(t, found, "table %s: no decoded row matches sample %s", e.Dir, wantJSON)
		}
		if matchedCols > 0 {
			checkedTables++
		}
	}
	t.Logf("spot-checked %d tables", checkedTables)
	require.GreaterOrEqual(t, checkedTables, 20, "too few tables were spot-checked")
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// canonicalExpected rewrites Java's "0E-10" spelling of a zero decimal.
func canonicalExpected(v any) any {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "0E-") {
			n, err := strconv.Atoi(strings.TrimPrefix(x, "0E-"))
			if err == nil {
				return "0." + strings.Repeat("0", n)
			}
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = canonicalExpected(x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = canonicalExpected(e)
		}
		return out
	}
	return v
}

// render turns a decoded value into the MANIFEST's JSON conventions.
func render(t testing.TB, v any, typ *Type) any {
	if v == nil {
		return nil
	}
	switch typ.Kind {
	case KindBoolean, KindString:
		return v
	case KindInt8:
		return float64(v.(int8))
	case KindInt16:
		return float64(v.(int16))
	case KindInt32:
		return float64(v.(int32))
	case KindInt64:
		return float64(v.(int64))
	case KindFloat:
		return float64(v.(float32))
	case KindDouble:
		return v.(float64)
	case KindBinary:
		return base64.StdEncoding.EncodeToString(v.([]byte))
	case KindDate:
		return v.(Date).String()
	case KindTimestamp:
		return v.(time.Time).UTC().Format(time.RFC3339Nano)
	case KindTimestampNTZ:
		return v.(time.Time).Format("2006-01-02T15:04:05.999999999")
	case KindDecimal:
		return v.(Decimal).String()
	case KindList:
		l := v.([]any)
		out := make([]any, len(l))
		for i := range l {
			out[i] = render(t, l[i], typ.Elem)
		}
		return out
	case KindStruct:
		l := v.([]any)
		out := map[string]any{}
		for i, f := range typ.Fields {
			out[f.Name] = render(t, l[i], f.Type)
		}
		return out
	case KindMap:
		out := map[string]any{}
		for _, e := range v.([]MapEntry) {
			out[renderKey(e.Key)] = render(t, e.Value, typ.Value)
		}
		return out
	}
	t.Fatalf("unexpected kind %v", typ.Kind)
	return nil
}

// renderKey renders a map key as Spark prints it (floats keep a ".0").
func renderKey(k any) string {
	switch x := k.(type) {
	case float32:
		return renderFloatKey(float64(x))
	case float64:
		return renderFloatKey(x)
	case Decimal:
		return x.String()
	}
	return fmt.Sprint(k)
}

func renderFloatKey(f float64) string {
	if f == math.Trunc(f) && !math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

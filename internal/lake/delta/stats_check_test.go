package delta

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// requireStatsHold checks a file's stats against its rows: numRecords is
// exact, nullCount is exact, and every non-null value of a top-level scalar
// column lies within [min, max] as a reader would compare them.
func requireStatsHold(t *testing.T, snap *Snapshot, st store.Store, add *Add) {
	t.Helper()
	var stats struct {
		NumRecords int64                      `json:"numRecords"`
		MinValues  map[string]json.RawMessage `json:"minValues"`
		MaxValues  map[string]json.RawMessage `json:"maxValues"`
		NullCount  map[string]json.RawMessage `json:"nullCount"`
	}
	d := json.NewDecoder(strings.NewReader(add.Stats))
	d.UseNumber()
	require.NoError(t, d.Decode(&stats), add.Stats)
	var rows []pq.Row
	require.NoError(t, snap.Scan(context.Background(), st, ScanOptions{Files: []*Add{add}}, func(_ *Add, rs []pq.Row) error {
		rows = append(rows, rs...)
		return nil
	}))
	require.Equal(t, int64(len(rows)), stats.NumRecords)
	for i, f := range snap.Schema().Fields {
		if _, nested := f.Type.(*StructType); nested {
			continue
		}
		nulls := int64(0)
		for _, r := range rows {
			if r[i] == nil {
				nulls++
			}
		}
		if raw, ok := stats.NullCount[f.Name]; ok {
			var n int64
			require.NoError(t, json.Unmarshal(raw, &n))
			require.Equal(t, nulls, n, "nullCount of %s", f.Name)
		}
		lo, hasLo := stats.MinValues[f.Name]
		hi, hasHi := stats.MaxValues[f.Name]
		for _, r := range rows {
			if r[i] == nil {
				continue
			}
			if hasLo {
				require.LessOrEqual(t, cmpStat(t, lo, r[i]), 0, "min of %s (%s) above %v", f.Name, lo, r[i])
			}
			if hasHi {
				require.GreaterOrEqual(t, cmpStat(t, hi, r[i]), 0, "max of %s (%s) below %v", f.Name, hi, r[i])
			}
		}
	}
}

// cmpStat compares a JSON stat bound with a value the way a Delta reader
// does (numbers numerically, strings bytewise, timestamps as instants).
func cmpStat(t *testing.T, raw json.RawMessage, v any) int {
	t.Helper()
	var s string
	isStr := json.Unmarshal(raw, &s) == nil
	switch x := v.(type) {
	case string:
		require.True(t, isStr)
		return strings.Compare(s, x)
	case pq.Date:
		require.True(t, isStr)
		return strings.Compare(s, x.String())
	case time.Time:
		require.True(t, isStr)
		ts, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return ts.Compare(x)
	case bool:
		var b bool
		require.NoError(t, json.Unmarshal(raw, &b))
		switch {
		case b == x:
			return 0
		case !b:
			return -1
		}
		return 1
	}
	bound, ok := new(big.Rat).SetString(string(raw))
	require.True(t, ok, "numeric bound %s", raw)
	var val *big.Rat
	switch x := v.(type) {
	case int8, int16, int32, int64:
		val = new(big.Rat).SetInt64(i64(x))
	case float32:
		val = new(big.Rat).SetFloat64(float64(x))
	case float64:
		val = new(big.Rat).SetFloat64(x)
	case pq.Decimal:
		val, _ = new(big.Rat).SetString(x.String())
	default:
		t.Fatalf("no stat comparison for %T", v)
	}
	if _, isFloat := v.(float32); isFloat {
		// A float32 bound is printed with float32 precision; compare at it.
		bf, _ := bound.Float32()
		return big.NewRat(0, 1).SetFloat64(float64(bf)).Cmp(val)
	}
	return bound.Cmp(val)
}

func TestStringStatsTrickyValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w, err := CreateTable(ctx, st, TableSpec{Schema: &StructType{Fields: []StructField{Field("s", Prim(TypeString), true)}}}, Options{})
	require.NoError(t, err)
	long := strings.Repeat("é", 31) + "zzzz"
	maxy := strings.Repeat("a", 32) + "\U0010FFFF\U0010FFFF"
	for _, vals := range [][]any{
		{"", "a", long, strings.Repeat("日本", 40)},
		{maxy, "a"}, // no safe 32-character max exists: it is omitted
		{"\xff\xfe invalid utf-8", "ok"},
		{nil, nil},
	} {
		rows := make([]pq.Row, len(vals))
		for i, v := range vals {
			rows[i] = pq.Row{v}
		}
		add, err := w.WriteFile(ctx, map[string]*string{}, rows)
		require.NoError(t, err)
		_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{add}})
		require.NoError(t, err)
		requireStatsHold(t, w.Snapshot(), st, add)
		if s, _ := vals[0].(string); strings.Contains(s, "invalid") {
			require.NotContains(t, add.Stats, "minValues", "no bounds for invalid UTF-8")
		}
		if vals[0] == maxy {
			require.NotContains(t, add.Stats, "maxValues")
			require.Contains(t, add.Stats, "minValues")
		}
	}
}

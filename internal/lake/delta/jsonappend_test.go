package delta

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
)

// The hand-appended JSON (jsonappend.go) must be encoding/json's, byte for
// byte: these tests hold both side by side on random values.

// statsJSONViaMaps is StatsJSON as it was written before jsonappend.go:
// nested maps handed to encoding/json. It is the oracle.
func statsJSONViaMaps(meta pq.FileMeta, numIndexed int) (string, error) {
	setNested := func(m map[string]any, path []string, v any) {
		for _, p := range path[:len(path)-1] {
			inner, ok := m[p].(map[string]any)
			if !ok {
				inner = map[string]any{}
				m[p] = inner
			}
			m = inner
		}
		m[path[len(path)-1]] = v
	}
	minV, maxV, nulls := map[string]any{}, map[string]any{}, map[string]any{}
	indexed := 0
	for _, c := range meta.Columns {
		if c.Repeated {
			continue
		}
		if numIndexed >= 0 && indexed >= numIndexed {
			break
		}
		indexed++
		setNested(nulls, c.Path, c.NullCount)
		if c.Min == nil || c.Max == nil {
			continue
		}
		lo, hi, ok := statBounds(c)
		if !ok {
			continue
		}
		if lo != nil {
			setNested(minV, c.Path, lo)
		}
		if hi != nil {
			setNested(maxV, c.Path, hi)
		}
	}
	out := map[string]any{"numRecords": meta.NumRows}
	if len(minV) > 0 {
		out["minValues"] = minV
	}
	if len(maxV) > 0 {
		out["maxValues"] = maxV
	}
	if len(nulls) > 0 {
		out["nullCount"] = nulls
	}
	b, err := marshalNoEscape(out)
	return string(b), err
}

// jsonTrickyRunes are the characters encoding/json treats specially, and
// a few it does not.
var jsonTrickyRunes = []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\b", "\f", "\n", "\r", "\t",
	"\x00", "\x01", "\x1f", "\x7f", "é", "日", "\u2028", "\u2029", "\U0001F600", "\U0010FFFF", "\xff", "\xc3", "\xe2\x80"}

func randomJSONString(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	for n := r.IntN(maxLen + 1); n > 0; n-- {
		b.WriteString(jsonTrickyRunes[r.IntN(len(jsonTrickyRunes))])
	}
	return b.String()
}

var jsonTrickyFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 9.99e20, 1.2345678901234567e25,
	math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, math.SmallestNonzeroFloat32, 123456789, 1e-300, 5e-324}

func randomJSONValue(r *rand.Rand, depth int) any {
	switch r.IntN(14) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return randomJSONString(r, 12)
	case 3:
		return r.Int64() - r.Int64()
	case 4:
		return int32(r.Uint32())
	case 5:
		return int8(r.Uint32())
	case 6:
		f := jsonTrickyFloats[r.IntN(len(jsonTrickyFloats))]
		if r.IntN(2) == 0 {
			f = -f
		}
		return f
	case 7:
		return float32(jsonTrickyFloats[r.IntN(len(jsonTrickyFloats))])
	case 8:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
	case 9:
		return float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
	case 10:
		return json.Number("12.5e3")
	case 11: // a type appendJSON hands to encoding/json
		return []any{"x<y", 1, map[string]int{"b": 2, "a": 1}}
	case 12:
		m := map[string]string{}
		for n := r.IntN(4); n > 0; n-- {
			m[randomJSONString(r, 5)] = randomJSONString(r, 8)
		}
		return m
	default:
		if depth > 2 {
			return uint64(r.Uint64())
		}
		m := map[string]any{}
		for n := r.IntN(5); n > 0; n-- {
			m[randomJSONString(r, 6)] = randomJSONValue(r, depth+1)
		}
		return m
	}
}

func TestAppendJSON_RandomValues_SameBytesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		v := randomJSONValue(r, 0)
		want, wantErr := marshalNoEscape(v)
		got, err := appendJSON([]byte("prefix"), v)
		if wantErr != nil {
			require.Error(t, err, "%#v", v)
			continue
		}
		require.NoError(t, err, "%#v", v)
		require.Equal(t, "prefix"+string(want), string(got), "%#v", v)
	}
	for _, s := range jsonTrickyRunes {
		want, _ := marshalNoEscape(s)
		require.Equal(t, string(want), string(appendJSONString(nil, s)), "%q", s)
	}
	for _, v := range []any{map[string]any(nil), map[string]string(nil), map[string]any{}} {
		want, _ := marshalNoEscape(v)
		got, err := appendJSON(nil, v)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}

func TestAppendJSON_NaNAndInf_FailAsInEncodingJSON(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), math.Inf(-1), float32(math.Inf(-1)), map[string]any{"x": math.NaN()}} {
		_, wantErr := marshalNoEscape(v)
		_, err := appendJSON(nil, v)
		require.Error(t, wantErr)
		require.EqualError(t, err, wantErr.Error())
	}
}

// randomStatColumns is a random schema's leaf columns (depth-first, names
// unique among siblings, so no path is a prefix of another) with random
// statistics of every kind statBounds knows.
func randomStatColumns(r *rand.Rand) []pq.ColumnStats {
	var cols []pq.ColumnStats
	var walk func(prefix []string, depth int)
	walk = func(prefix []string, depth int) {
		seen := map[string]bool{}
		for n := 1 + r.IntN(4); n > 0; n-- {
			name := randomJSONString(r, 4)
			if seen[name] {
				continue
			}
			seen[name] = true
			path := append(append([]string(nil), prefix...), name)
			if depth < 3 && r.IntN(3) == 0 {
				walk(path, depth+1)
				continue
			}
			cols = append(cols, randomStatColumn(r, path))
		}
	}
	walk(nil, 0)
	return cols
}

func randomStatColumn(r *rand.Rand, path []string) pq.ColumnStats {
	c := pq.ColumnStats{Path: path, NullCount: r.Int64N(1000), Repeated: r.IntN(8) == 0}
	if r.IntN(6) == 0 {
		return c // no min/max (all null)
	}
	switch r.IntN(10) {
	case 0:
		c.Min, c.Max = false, true
	case 1:
		c.Min, c.Max = int64(-r.Int64N(1e12)), r.Int64()
	case 2:
		c.Min, c.Max = int32(-r.Int32N(100)), int32(r.Int32())
	case 3:
		c.Min, c.Max = float64(-jsonTrickyFloats[r.IntN(len(jsonTrickyFloats))]), r.NormFloat64()*1e22
		if r.IntN(5) == 0 {
			c.Max = math.Inf(1)
		}
	case 4:
		c.Min, c.Max = float32(r.NormFloat64()), float32(jsonTrickyFloats[r.IntN(len(jsonTrickyFloats))])
	case 5:
		c.Min, c.Max = randomJSONString(r, 40), randomJSONString(r, 40)
	case 6:
		c.Min, c.Max = []byte("a"), []byte("b")
	case 7:
		c.Min, c.Max = pq.Date(r.Int32N(30000)), pq.Date(r.Int32N(30000))
	case 8:
		c.Min, c.Max = time.Unix(r.Int64N(2e9), r.Int64N(1e9)), time.Unix(r.Int64N(2e9), r.Int64N(1e9))
	default:
		c.Min = pq.Decimal{Unscaled: big.NewInt(-r.Int64N(1e17)), Scale: r.IntN(6)}
		c.Max = pq.Decimal{Unscaled: big.NewInt(r.Int64N(1e14)), Scale: 2}
	}
	return c
}

func TestStatsJSON_RandomSchemasAndStatistics_SameBytesAsTheMapEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		meta := pq.FileMeta{NumRows: r.Int64N(1 << 40), Columns: randomStatColumns(r)}
		numIndexed := []int{-1, 0, 1, 3, 32}[r.IntN(5)]
		want, wantErr := statsJSONViaMaps(meta, numIndexed)
		got, err := StatsJSON(meta, numIndexed)
		if wantErr != nil {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.True(t, json.Valid([]byte(got)), got)
	}
}

func TestStatsJSON_NoColumns_OnlyNumRecords(t *testing.T) {
	got, err := StatsJSON(pq.FileMeta{NumRows: 7}, 32)
	require.NoError(t, err)
	require.Equal(t, `{"numRecords":7}`, got)
}

func TestAppendNested_LeafAndAColumnInsideIt_IsRefused(t *testing.T) {
	_, err := appendNested(nil, []statLeaf{{[]string{"a", "b"}, 1}, {[]string{"a"}, 2}})
	require.ErrorContains(t, err, "inside it")
}

func BenchmarkStatsJSON(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	meta := pq.FileMeta{NumRows: 10}
	for i := 0; i < 12; i++ {
		c := randomStatColumn(r, []string{"col" + string(rune('a'+i))})
		c.Repeated = false
		meta.Columns = append(meta.Columns, c)
	}
	b.Run("maps", func(b *testing.B) {
		for b.Loop() {
			_, _ = statsJSONViaMaps(meta, 32)
		}
	})
	b.Run("appended", func(b *testing.B) {
		for b.Loop() {
			_, _ = StatsJSON(meta, 32)
		}
	})
}

// encodeCommitViaEncoder is EncodeCommit as it was before appendAction:
// every line through encoding/json. It is the oracle.
func encodeCommitViaEncoder(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range actions {
		if err := enc.Encode(&actions[i]); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func randomStringPtrMap(r *rand.Rand) map[string]*string {
	if r.IntN(4) == 0 {
		return nil
	}
	m := map[string]*string{}
	for n := r.IntN(4); n > 0; n-- {
		if r.IntN(3) == 0 {
			m[randomJSONString(r, 5)] = nil
		} else {
			v := randomJSONString(r, 8)
			m[randomJSONString(r, 5)] = &v
		}
	}
	return m
}

func randomAction(r *rand.Rand) Action {
	switch r.IntN(6) {
	case 0, 1:
		add := &Add{Path: randomJSONString(r, 30), PartitionValues: randomStringPtrMap(r), Size: r.Int64(),
			ModificationTime: r.Int64() - r.Int64(), DataChange: r.IntN(2) == 0, Tags: randomStringPtrMap(r)}
		if r.IntN(3) > 0 {
			meta := pq.FileMeta{NumRows: r.Int64N(1000), Columns: randomStatColumns(r)}
			add.Stats, _ = StatsJSON(meta, 32)
		}
		if r.IntN(10) == 0 {
			n := r.Int64()
			add.BaseRowID = &n // handed to encoding/json
		}
		return Action{Add: add}
	case 2:
		txn := &Txn{AppID: randomJSONString(r, 10), Version: r.Int64()}
		if r.IntN(2) == 0 {
			n := r.Int64()
			txn.LastUpdated = &n
		}
		return Action{Txn: txn}
	case 3:
		v := randomJSONValue(r, 0)
		b, err := json.MarshalIndent(map[string]any{"operation": "WRITE <&>", "x": v}, " ", "\t")
		if err != nil {
			b = []byte(`{"operation": "WRITE"}`)
		}
		return Action{CommitInfo: b}
	case 4:
		return Action{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}}
	default:
		return Action{Remove: &Remove{Path: randomJSONString(r, 20), DataChange: true}}
	}
}

func TestEncodeCommit_RandomActions_SameBytesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 3000; i++ {
		actions := make([]Action, 1+r.IntN(6))
		for j := range actions {
			actions[j] = randomAction(r)
		}
		want, err := encodeCommitViaEncoder(actions)
		require.NoError(t, err)
		got, err := EncodeCommit(actions)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}

func TestEncodeCommit_InvalidCommitInfo_FailsAsInEncodingJSON(t *testing.T) {
	actions := []Action{{CommitInfo: json.RawMessage(`{"a":`)}}
	_, wantErr := encodeCommitViaEncoder(actions)
	_, err := EncodeCommit(actions)
	require.Error(t, wantErr)
	require.ErrorContains(t, err, wantErr.Error())
}

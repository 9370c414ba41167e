package delta

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

func richSchema() *StructType {
	return &StructType{Fields: []StructField{
		Field("seq", Prim(TypeLong), false),
		Field("event_type", Prim(TypeString), true),
		Field("recorded_at", Prim(TypeTimestamp), true),
		Field("hash", Prim(TypeBinary), true),
		Field("amount", Decimal(10, 2), true),
		Field("meta", &StructType{Fields: []StructField{Field("k", Prim(TypeString), true), Field("n", Prim(TypeInteger), true)}}, true),
		Field("tags", &ArrayType{ElementType: Prim(TypeString), ContainsNull: true}, true),
		Field("tenant_id", Prim(TypeString), false),
		Field("day", Prim(TypeDate), true),
	}}
}

// TestWriteFileScanRoundTrip writes data files into partitions (including
// a null partition and one with characters that need escaping), commits
// them, and reads them back through a fresh Load.
func TestWriteFileScanRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	w, err := CreateTable(ctx, fs, TableSpec{Schema: richSchema(), PartitionColumns: []string{"tenant_id", "day"}}, Options{})
	require.NoError(t, err)
	ts := time.Date(2026, 3, 4, 5, 6, 7, 891234000, time.UTC)
	long := strings.Repeat("x", 40)
	rows := []pq.Row{
		{int64(1), "claim.submitted", ts, []byte{1, 2}, "12.30", []any{"a", int32(1)}, []any{"t1", "t2"}},
		{int64(2), long, ts.Add(time.Second), nil, nil, nil, []any{}},
		{int64(3), nil, nil, []byte{}, "-1.05", []any{nil, nil}, nil},
	}
	tenant := "acme/west:1 %"
	day := "2026-03-04"
	add1, err := w.WriteFile(ctx, map[string]*string{"tenant_id": &tenant, "day": &day}, rows)
	require.NoError(t, err)
	add2, err := w.WriteFile(ctx, map[string]*string{"tenant_id": &tenant, "day": nil}, rows[:1])
	require.NoError(t, err)
	require.True(t, strings.Contains(add2.Path, "__HIVE_DEFAULT_PARTITION__"))
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{add1, add2}})
	require.NoError(t, err)

	// Stats: exact numRecords, prefix-truncated strings with a tie-breaker
	// on the max, ms timestamps with the max rounded up, no binary bounds,
	// nested struct stats, no partition columns, no list columns.
	var stats struct {
		NumRecords int64          `json:"numRecords"`
		MinValues  map[string]any `json:"minValues"`
		MaxValues  map[string]any `json:"maxValues"`
		NullCount  map[string]any `json:"nullCount"`
	}
	require.NoError(t, json.Unmarshal([]byte(add1.Stats), &stats))
	require.Equal(t, int64(3), stats.NumRecords)
	require.Equal(t, float64(1), stats.MinValues["seq"])
	require.Equal(t, float64(3), stats.MaxValues["seq"])
	require.Equal(t, "claim.submitted", stats.MinValues["event_type"])
	require.Equal(t, strings.Repeat("x", 32)+"\U0010FFFF", stats.MaxValues["event_type"])
	require.Equal(t, "2026-03-04T05:06:07.891Z", stats.MinValues["recorded_at"])
	require.Equal(t, "2026-03-04T05:06:08.892Z", stats.MaxValues["recorded_at"])
	require.NotContains(t, stats.MinValues, "hash")
	require.Equal(t, float64(1), stats.NullCount["hash"])
	require.Equal(t, -1.05, stats.MinValues["amount"])
	require.Equal(t, map[string]any{"k": "a", "n": float64(1)}, stats.MinValues["meta"])
	require.Equal(t, map[string]any{"k": float64(2), "n": float64(2)}, stats.NullCount["meta"])
	require.NotContains(t, stats.NullCount, "tags")
	require.NotContains(t, stats.NullCount, "tenant_id")
	require.NotContains(t, stats.NullCount, "day")

	snap, err := Load(ctx, fs)
	require.NoError(t, err)
	requireStatsHold(t, snap, fs, add1)
	requireStatsHold(t, snap, fs, add2)
	var got []map[string]any
	require.NoError(t, snap.Scan(ctx, fs, ScanOptions{}, func(_ *Add, rs []pq.Row) error {
		for _, r := range rs {
			m := map[string]any{}
			for i, f := range snap.Schema().Fields {
				m[f.Name] = JSONValue(r[i], f.Type)
			}
			got = append(got, m)
		}
		return nil
	}))
	require.Len(t, got, 4)
	want := map[string]any{"seq": float64(1), "event_type": "claim.submitted", "recorded_at": "2026-03-04T05:06:07.891234Z",
		"hash": "AQI=", "amount": "12.30", "meta": map[string]any{"k": "a", "n": float64(1)}, "tags": []any{"t1", "t2"},
		"tenant_id": tenant, "day": "2026-03-04"}
	found := 0
	for _, g := range got {
		if g["seq"] == float64(1) {
			found++
			if g["day"] == nil {
				w2 := map[string]any{}
				for k, v := range want {
					w2[k] = v
				}
				w2["day"] = nil
				require.Equal(t, w2, g)
			} else {
				require.Equal(t, want, g)
			}
		}
	}
	require.Equal(t, 2, found)
	// A scan can be restricted to some live files.
	n := 0
	require.NoError(t, snap.Scan(ctx, fs, ScanOptions{Files: []*Add{add2}}, func(f *Add, rs []pq.Row) error {
		require.Equal(t, add2.Path, f.Path)
		n += len(rs)
		return nil
	}))
	require.Equal(t, 1, n)
	require.Error(t, snap.Scan(ctx, fs, ScanOptions{Files: []*Add{fakeAdd("")}}, func(*Add, []pq.Row) error { return nil }))
	// A projection reads only what is asked, partition columns included.
	require.NoError(t, snap.Scan(ctx, fs, ScanOptions{Columns: []string{"day", "seq"}}, func(_ *Add, rs []pq.Row) error {
		for _, r := range rs {
			require.Len(t, r, 2)
			require.IsType(t, int64(0), r[1])
		}
		return nil
	}))
}

func TestTruncateMax(t *testing.T) {
	t.Parallel()
	s32 := strings.Repeat("a", 32)
	require.Equal(t, s32, truncateMax(s32))
	require.Equal(t, s32+"\U0010FFFF", truncateMax(s32+"b"))
	// A string whose 33rd character is the maximum code point has no safe
	// 32-character bound: the max is omitted.
	require.Nil(t, truncateMax(s32+"\U0010FFFF\U0010FFFF"))
	require.Equal(t, strings.Repeat("é", 32), truncatePrefix(strings.Repeat("é", 40)))
}

func TestParsePartitionValue(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		raw  *string
		typ  DataType
		want any
	}{
		{nil, Prim(TypeString), nil},
		{s(""), Prim(TypeString), nil},
		{s("null"), Prim(TypeString), "null"},
		{s("42"), Prim(TypeInteger), int32(42)},
		{s("-7"), Prim(TypeByte), int8(-7)},
		{s("true"), Prim(TypeBoolean), true},
		{s("2021-09-08"), Prim(TypeDate), pq.DateOf(2021, 9, 8)},
		{s("2020-01-01 08:09:10.001"), Prim(TypeTimestamp), time.Date(2020, 1, 1, 8, 9, 10, 1000000, time.UTC)},
		{s("2020-01-01T08:09:10.000001Z"), Prim(TypeTimestamp), time.Date(2020, 1, 1, 8, 9, 10, 1000, time.UTC)},
		{s("1.0"), Prim(TypeDouble), 1.0},
	} {
		got, err := ParsePartitionValue(tc.raw, tc.typ)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	d, err := ParsePartitionValue(s("234.00000"), Decimal(12, 5))
	require.NoError(t, err)
	require.Equal(t, "234.00000", d.(pq.Decimal).String())
	_, err = ParsePartitionValue(s("x"), Prim(TypeLong))
	require.ErrorIs(t, err, ErrCorruptLog)
}

func TestParseInterval(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"interval 7 days":         7 * 24 * time.Hour,
		"interval 1 weeks":        7 * 24 * time.Hour,
		"INTERVAL 1 WEEK":         7 * 24 * time.Hour,
		"168 hours":               168 * time.Hour,
		"interval 2 days 4 hours": 52 * time.Hour,
		"interval 30 seconds":     30 * time.Second,
	} {
		got, err := ParseInterval(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "interval", "7", "interval x days", "interval 1 fortnight", "interval -1 days"} {
		_, err := ParseInterval(bad)
		require.Error(t, err, bad)
	}
}

func TestPartitionValueRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v   any
		typ DataType
	}{
		{int64(-42), Prim(TypeLong)}, {int32(7), Prim(TypeInteger)}, {int16(-3), Prim(TypeShort)}, {int8(1), Prim(TypeByte)},
		{true, Prim(TypeBoolean)}, {float32(1.5), Prim(TypeFloat)}, {2.25, Prim(TypeDouble)}, {"null", Prim(TypeString)},
		{pq.DateOf(2026, 3, 4), Prim(TypeDate)}, {time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC), Prim(TypeTimestamp)},
		{pq.NewDecimal(-12345, 3), Decimal(10, 3)}, {[]byte("raw"), Prim(TypeBinary)},
	} {
		s := FormatPartitionValue(tc.v)
		got, err := ParsePartitionValue(s, tc.typ)
		require.NoError(t, err, *s)
		require.Equal(t, tc.v, got, *s)
	}
	require.Nil(t, FormatPartitionValue(nil))
	require.Equal(t, "a%2Fb%3Dc%25 d", hiveEscape("a/b=c% d"))
}

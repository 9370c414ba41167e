package pq

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkpointWant is the nested projection a Delta reader asks of a checkpoint:
// fields named by the protocol, some absent from some writers' files.
func checkpointWant() *Schema {
	return NewSchema(
		Nullable("txn", StructOf(Nullable("appId", String), Nullable("version", Int64), Nullable("lastUpdated", Int64))),
		Nullable("add", StructOf(
			Nullable("path", String), Nullable("partitionValues", MapOf(String, String, true)),
			Nullable("size", Int64), Nullable("modificationTime", Int64), Nullable("dataChange", Boolean),
			Nullable("stats", String), Nullable("tags", MapOf(String, String, true)),
		)),
		Nullable("remove", StructOf(Nullable("path", String), Nullable("deletionTimestamp", Int64), Nullable("dataChange", Boolean))),
		Nullable("metaData", StructOf(Nullable("id", String), Nullable("schemaString", String),
			Nullable("partitionColumns", ListOf(String, true)), Nullable("configuration", MapOf(String, String, true)))),
		Nullable("protocol", StructOf(Nullable("minReaderVersion", Int32), Nullable("minWriterVersion", Int32),
			Nullable("readerFeatures", ListOf(String, true)), Nullable("writerFeatures", ListOf(String, true)))),
		Nullable("domainMetadata", StructOf(Nullable("domain", String))),
	)
}

type cpSummary struct {
	adds, removes int
	txns          map[string]int64
	protocol      []any
	partCols      []any
}

func readCheckpoint(t *testing.T, rel string) cpSummary {
	t.Helper()
	p := filepath.Join(goldenDir(t), rel)
	fh, rows := readFileRowsFor(t, p, checkpointWant())
	_ = fh
	s := cpSummary{txns: map[string]int64{}}
	for _, r := range rows {
		if txn, ok := r[0].([]any); ok {
			s.txns[txn[0].(string)] = txn[1].(int64)
		}
		if add, ok := r[1].([]any); ok {
			s.adds++
			require.IsType(t, "", add[0])
			_, err := ToStringMap(add[1])
			require.NoError(t, err)
		}
		if r[2] != nil {
			s.removes++
		}
		if md, ok := r[3].([]any); ok {
			s.partCols = md[2].([]any)
		}
		if pr, ok := r[4].([]any); ok {
			s.protocol = pr
		}
		require.Nil(t, r[5], "no checkpoint in the corpus has domainMetadata")
	}
	return s
}

func readFileRowsFor(t *testing.T, p string, want *Schema) (*File, []Row) {
	t.Helper()
	f, _ := readFileRows(t, p) // opens and validates the whole file first
	rs, err := f.RowsFor(want)
	require.NoError(t, err)
	rows, err := rs.ReadAll()
	require.NoError(t, err)
	return f, rows
}

func TestGoldenCheckpointsProjectLikeADeltaReader(t *testing.T) {
	t.Parallel()
	t.Run("kernel-rs checkpoint holds both txns", func(t *testing.T) {
		s := readCheckpoint(t, "delta-kernel-rs__app-txn-checkpoint/_delta_log/00000000000000000001.checkpoint.parquet")
		require.Equal(t, map[string]int64{"my-app": 3, "my-app2": 2}, s.txns)
		require.Equal(t, 4, s.adds)
		require.Equal(t, []any{"modified"}, s.partCols)
	})
	t.Run("spark checkpoint with removes", func(t *testing.T) {
		s := readCheckpoint(t, "delta__basic-with-inserts-deletes-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet")
		require.Equal(t, 6, s.adds) // numOfAddFiles in _last_checkpoint
		require.Positive(t, s.removes)
		require.Equal(t, int32(1), s.protocol[0])
		require.Equal(t, int32(2), s.protocol[1])
		require.Nil(t, s.protocol[2])
	})
	t.Run("old spark streaming checkpoint txn", func(t *testing.T) {
		s := readCheckpoint(t, "delta-rs__delta-0.2.0/_delta_log/00000000000000000003.checkpoint.parquet")
		require.Equal(t, map[string]int64{"e4a20b59-dd0e-4c50-b074-e8ae4786df30": 0}, s.txns)
	})
	t.Run("multi-part checkpoint parts add up", func(t *testing.T) {
		a := readCheckpoint(t, "delta__multi-part-checkpoint/_delta_log/00000000000000000001.checkpoint.0000000001.0000000002.parquet")
		b := readCheckpoint(t, "delta__multi-part-checkpoint/_delta_log/00000000000000000001.checkpoint.0000000002.0000000002.parquet")
		require.Equal(t, 10, a.adds+b.adds)
	})
}

// TestCheckpointShapedRoundTrip writes what a checkpoint writer writes (nullable
// action structs, string maps from Go maps, string lists) and reads it back
// through the same projection as a foreign checkpoint.
func TestCheckpointShapedRoundTrip(t *testing.T) {
	t.Parallel()
	s := checkpointWant()
	rows := []Row{
		{nil, nil, nil, nil, []any{int32(1), int32(2), nil, nil}, nil},
		{nil, nil, nil, []any{"id-1", `{"type":"struct","fields":[]}`, []string{"day"}, map[string]string{"delta.appendOnly": "false"}}, nil, nil},
		{[]any{"oml-lakewriter", int64(42), int64(1700000000000)}, nil, nil, nil, nil, nil},
		{nil, []any{"day=2026-11-30/part-1.parquet", map[string]string{"day": "2026-11-30"}, int64(1234), int64(1700000000000), true, `{"numRecords":3}`, nil}, nil, nil, nil, nil},
		{nil, []any{"part-2.parquet", map[string]string{}, int64(1), int64(2), false, nil, map[string]string{"k": "v"}}, nil, nil, nil, nil},
		{nil, nil, []any{"old.parquet", int64(1700000000001), true}, nil, nil, nil},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, Options{})
	require.NoError(t, err)
	require.NoError(t, w.Write(rows))
	_, err = w.Close()
	require.NoError(t, err)
	f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	rs, err := f.RowsFor(s)
	require.NoError(t, err)
	got, err := rs.ReadAll()
	require.NoError(t, err)
	require.Len(t, got, len(rows))
	require.Equal(t, []any{"oml-lakewriter", int64(42), int64(1700000000000)}, got[2][0])
	require.Equal(t, []any{"day"}, got[1][3].([]any)[2])
	m, err := ToStringMap(got[3][1].([]any)[1])
	require.NoError(t, err)
	require.Equal(t, map[string]string{"day": "2026-11-30"}, m)
	require.Equal(t, []MapEntry{}, got[4][1].([]any)[1])
	require.Nil(t, got[3][1].([]any)[6])
	require.Equal(t, []MapEntry{{Key: "k", Value: "v"}}, got[4][1].([]any)[6])
	require.Nil(t, got[0][1])
}

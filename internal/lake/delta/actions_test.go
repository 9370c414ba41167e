package delta

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeCommitLenientOnNewlineStrictOnGarbage(t *testing.T) {
	t.Parallel()
	acts, err := DecodeCommitBytes([]byte(`{"txn":{"appId":"a","version":1}}` + "\n\n" + `{"add":{"path":"f","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,"deletionVector":null,"tags":null}}`))
	require.NoError(t, err)
	require.Len(t, acts, 2)
	require.Equal(t, "txn", acts[0].Kind())
	require.Equal(t, "add", acts[1].Kind())
	require.Nil(t, acts[1].Add.DeletionVector)

	for name, body := range map[string]string{
		"not json":          "garbage\n",
		"truncated":         `{"add":{"path":"f"` + "\n",
		"array":             `[1,2]` + "\n",
		"two actions":       `{"txn":{"appId":"a","version":1},"add":{"path":"f","size":1}}` + "\n",
		"add without path":  `{"add":{"size":1}}` + "\n",
		"txn without appId": `{"txn":{"version":1}}` + "\n",
		"bad protocol":      `{"protocol":{"minReaderVersion":0,"minWriterVersion":2}}` + "\n",
		"commitInfo string": `{"commitInfo":"x"}` + "\n",
	} {
		_, err := DecodeCommitBytes([]byte(body))
		require.ErrorIs(t, err, ErrCorruptLog, name)
	}
	// commitInfo is opaque: booleans and nulls in operationParameters are fine.
	acts, err = DecodeCommitBytes([]byte(`{"commitInfo":{"operationParameters":{"auto":false,"description":null},"operation":"OPTIMIZE"}}`))
	require.NoError(t, err)
	require.Equal(t, "OPTIMIZE", ParseCommitInfo(acts[0].CommitInfo).Operation)
	// Unknown action types are ignored (forward compatible), cdc recognized.
	acts, err = DecodeCommitBytes([]byte(`{"somethingNew":{"x":1}}` + "\n" + `{"cdc":{"path":"c","size":1}}`))
	require.NoError(t, err)
	require.Equal(t, "unknown", acts[0].Kind())
	require.Equal(t, "cdc", acts[1].Kind())
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	lu := int64(5)
	v := "x y"
	in := []Action{
		{CommitInfo: []byte(`{"operation":"WRITE"}`)},
		{Add: &Add{Path: "a%20b", PartitionValues: map[string]*string{"p": &v, "q": nil}, Size: 3, ModificationTime: 4, DataChange: true, Stats: `{"numRecords":1}`}},
		{Txn: &Txn{AppID: "oml-lakewriter", Version: 9, LastUpdated: &lu}},
	}
	b, err := EncodeCommit(in)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(b), "\n"))
	require.Contains(t, string(b), `"q":null`)
	out, err := DecodeCommitBytes(b)
	require.NoError(t, err)
	require.Equal(t, in[1].Add, out[1].Add)
	require.Equal(t, in[2].Txn, out[2].Txn)
	_, err = EncodeCommit([]Action{{}})
	require.Error(t, err)
}

func TestDecodePathOnce(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"x=A%252FA/part-1.parquet":           "x=A%2FA/part-1.parquet",
		"_2=bar+%252521/part-0.parquet":      "_2=bar+%2521/part-0.parquet",
		"x=B%20B/f.parquet":                  "x=B B/f.parquet",
		"part-00000-abc.c000.snappy.parquet": "part-00000-abc.c000.snappy.parquet",
	} {
		got, err := DecodePath(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, want, mustDecode(t, EncodePath(want)))
	}
	_, err := DecodePath("s3://bucket/table/f.parquet")
	require.ErrorIs(t, err, ErrUnsupported)
	_, err = DecodePath("/abs/f.parquet")
	require.ErrorIs(t, err, ErrUnsupported)
	_, err = DecodePath("bad%zz")
	require.ErrorIs(t, err, ErrCorruptLog)
}

func mustDecode(t *testing.T, p string) string {
	d, err := DecodePath(p)
	require.NoError(t, err)
	return d
}

// TestSchemaRoundTripGolden parses every corpus schema, serializes it and
// parses it again; Spark-written schemas serialize back byte for byte.
func TestSchemaRoundTripGolden(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	n := 0
	for _, e := range entries {
		files, _ := filepath.Glob(filepath.Join(dir, e.Dir, "_delta_log", "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			acts, err := DecodeCommitBytes(b)
			if err != nil {
				continue // v2 checkpoint JSON files etc. are not commits
			}
			for _, a := range acts {
				if a.MetaData == nil || a.MetaData.SchemaString == "" {
					continue
				}
				st, err := ParseSchema(a.MetaData.SchemaString)
				if err != nil {
					require.ErrorIs(t, err, ErrUnsupported, "%s: %v", f, err)
					continue
				}
				out, err := MarshalSchema(st)
				require.NoError(t, err)
				again, err := ParseSchema(out)
				require.NoError(t, err)
				require.Equal(t, st, again, f)
				if !strings.Contains(a.MetaData.SchemaString, `"metadata":{"`) {
					require.Equal(t, a.MetaData.SchemaString, out, f)
				}
				n++
			}
		}
	}
	require.Greater(t, n, 20)
}

func TestParseSchemaTypes(t *testing.T) {
	t.Parallel()
	st, err := ParseSchema(`{"type":"struct","fields":[{"name":"d","type":"decimal(38, 18)","nullable":true,"metadata":{}},{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"integer","containsNull":false},"valueContainsNull":true},"nullable":false,"metadata":{"comment":"x"}}]}`)
	require.NoError(t, err)
	require.Equal(t, &DecimalType{Precision: 38, Scale: 18}, st.Fields[0].Type)
	require.Equal(t, "map", st.Fields[1].Type.TypeString())
	out, err := MarshalSchema(st)
	require.NoError(t, err)
	require.Contains(t, out, `"decimal(38,18)"`)
	require.Contains(t, out, `"metadata":{"comment":"x"}`)
	_, err = ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"A","type":"long","nullable":true,"metadata":{}}]}`)
	require.ErrorIs(t, err, ErrCorruptLog)
	_, err = ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"interval","nullable":true,"metadata":{}}]}`)
	require.ErrorIs(t, err, ErrUnsupported)
	_, err = ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"decimal(40,2)","nullable":true,"metadata":{}}]}`)
	require.ErrorIs(t, err, ErrCorruptLog)
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add([]byte(`{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}`))
	f.Add([]byte(`{"commitInfo":{"operation":"WRITE"}}` + "\n" + `{"txn":{"appId":"a","version":1}}`))
	f.Add([]byte(`{"metaData":{"id":"x","format":{"provider":"parquet"},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"configuration":{}}}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		acts, err := DecodeCommitBytes(b)
		if err != nil {
			return
		}
		for _, a := range acts {
			if a.Kind() == "unknown" {
				return // unknown actions are not re-encodable
			}
		}
		out, err := EncodeCommit(acts)
		if err != nil {
			t.Fatalf("re-encoding decoded actions: %v", err)
		}
		again, err := DecodeCommitBytes(out)
		if err != nil || len(again) != len(acts) {
			t.Fatalf("round trip: %v (%d vs %d actions)", err, len(again), len(acts))
		}
	})
}

func FuzzParseSchema(f *testing.F) {
	f.Add(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`)
	f.Add(`{"type":"struct","fields":[{"name":"m","type":{"type":"map","keyType":"string","valueType":"decimal(3,1)","valueContainsNull":true},"nullable":true,"metadata":{}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseSchema(s)
		if err != nil {
			return
		}
		out, err := MarshalSchema(st)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := ParseSchema(out); err != nil {
			t.Fatalf("reparse %q: %v", out, err)
		}
	})
}

package delta

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

// rawTable writes commit 0 (protocol + metaData + extra actions) directly.
func rawTable(t *testing.T, p Protocol, schema string, conf map[string]string, extra ...string) store.Store {
	t.Helper()
	st := store.NewMem()
	if conf == nil {
		conf = map[string]string{}
	}
	acts := []Action{{Protocol: &p}, {MetaData: &Metadata{ID: "t", Format: Format{Provider: "parquet"}, SchemaString: schema, PartitionColumns: []string{}, Configuration: conf}}}
	body, err := EncodeCommit(acts)
	require.NoError(t, err)
	for _, e := range extra {
		body = append(body, []byte(e+"\n")...)
	}
	require.NoError(t, st.PutIfAbsent(context.Background(), CommitKey(0), body))
	return st
}

const simpleSchema = `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}`

func TestReadGateNamesTheFeature(t *testing.T) {
	t.Parallel()
	p12 := Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	for _, tc := range []struct {
		name    string
		st      store.Store
		feature string
	}{
		{"reader-2", rawTable(t, Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, simpleSchema, nil), "columnMapping"},
		{"reader-3-dv", rawTable(t, Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, simpleSchema, nil), "deletionVectors"},
		{"reader-3-unknown", rawTable(t, Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"somethingNew"}}, simpleSchema, nil), "somethingNew"},
		{"reader-99", rawTable(t, Protocol{MinReaderVersion: 99, MinWriterVersion: 7}, simpleSchema, nil), "readerVersion 99"},
		{"txn-retention", rawTable(t, p12, simpleSchema, map[string]string{"delta.setTransactionRetentionDuration": "interval 7 days"}), "delta.setTransactionRetentionDuration"},
		{"column-mapping-config", rawTable(t, p12, simpleSchema, map[string]string{"delta.columnMapping.mode": "name"}), "columnMapping"},
		{"timestamp-ntz-column", rawTable(t, p12, `{"type":"struct","fields":[{"name":"t","type":"timestamp_ntz","nullable":true,"metadata":{}}]}`, nil), "timestampNtz"},
		{"variant-column", rawTable(t, p12, `{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,"metadata":{}}]}`, nil), "variantType"},
		{"deletion-vector-on-add", rawTable(t, p12, simpleSchema, nil,
			`{"add":{"path":"f","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,"deletionVector":{"storageType":"u","pathOrInlineDv":"x","sizeInBytes":1,"cardinality":1}}}`), "deletionVectors"},
		{"sidecar-action", rawTable(t, p12, simpleSchema, nil, `{"sidecar":{"path":"x.parquet","sizeInBytes":1}}`), "v2Checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := Load(context.Background(), tc.st)
			require.Nil(t, snap)
			require.ErrorIs(t, err, ErrUnsupported)
			var ue *UnsupportedError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.feature, ue.Feature)
			require.Equal(t, "read", ue.Op)
			_, err = OpenWriter(context.Background(), tc.st, Options{})
			require.ErrorIs(t, err, ErrUnsupported)
		})
	}
}

func TestWriteGateNamesTheFeature(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		st      store.Store
		feature string
	}{
		{"writer-3", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, simpleSchema, nil), "checkConstraints"},
		{"writer-4", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, simpleSchema, nil), "changeDataFeed"},
		{"writer-6", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 6}, simpleSchema, nil), "identityColumns"},
		{"writer-7-features", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "inCommitTimestamp", "rowTracking"}}, simpleSchema, nil), "inCommitTimestamp, rowTracking"},
		{"writer-8", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 8}, simpleSchema, nil), "writerVersion 8"},
		{"check-constraint", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, simpleSchema, map[string]string{"delta.constraints.pos": "a > 0"}), "checkConstraints"},
		{"invariant", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 2},
			`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.invariants":"{\"expression\":{\"expression\":\"a > 0\"}}"}}]}`, nil), "invariants"},
		{"generated-column", rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 2},
			`{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.generationExpression":"1"}}]}`, nil), "generatedColumns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), tc.st)
			require.NoError(t, err, "readable")
			w, err := OpenWriter(context.Background(), tc.st, Options{})
			require.Nil(t, w)
			var ue *UnsupportedError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.feature, ue.Feature)
			require.Equal(t, "write to", ue.Op)
		})
	}
	// Writer 7 with only appendOnly/invariants (inactive) is writable, and
	// appendOnly is enforced.
	st := rawTable(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants"}}, simpleSchema, nil)
	w, err := OpenWriter(context.Background(), st, Options{})
	require.NoError(t, err)
	_, err = w.Commit(context.Background(), Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	res, err := w.Checkpoint(context.Background())
	require.NoError(t, err)
	snap, err := Load(context.Background(), st)
	require.NoError(t, err)
	require.Equal(t, res.Version, snap.CheckpointVersion())
	require.Equal(t, []string{"appendOnly", "invariants"}, snap.Protocol().WriterFeatures, "the checkpoint keeps the writer features")
}

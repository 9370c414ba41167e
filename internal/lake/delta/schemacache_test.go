package delta

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

// TestSchemaString_NewAndLoadedTablesShareOneCopy: every snapshot of a
// table of the same schema, new or loaded from its log, keeps the same
// bytes of the schema string (one copy per kind, not per table), and the
// string is still the table's own.
func TestSchemaString_NewAndLoadedTablesShareOneCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want, err := MarshalSchema(testSchema())
	require.NoError(t, err)
	var snaps []*Snapshot
	for range 2 {
		w, err := NewTable(store.NewMem(), TableSpec{Schema: testSchema()}, Options{})
		require.NoError(t, err)
		snaps = append(snaps, w.Snapshot())
	}
	st := store.NewMem()
	w, err := NewTable(st, TableSpec{Schema: testSchema()}, Options{})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	loaded, err := Load(ctx, st)
	require.NoError(t, err)
	snaps = append(snaps, loaded)

	first := snaps[0].Metadata().SchemaString
	for i, s := range snaps {
		got := s.Metadata().SchemaString
		require.Equal(t, want, got, "snapshot %d", i)
		require.Same(t, unsafe.StringData(first), unsafe.StringData(got), "snapshot %d keeps its own copy", i)
	}
}

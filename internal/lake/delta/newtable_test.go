package delta

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// TestNewTable_FirstCommitCreatesVersionZeroWithItsRows: a NewTable writer
// writes nothing until its first commit, which is version 0 and carries the
// protocol, the metadata, the data file and the txn in one log entry; a
// reader sees the rows at version 0 and the writer goes on at version 1.
func TestNewTable_FirstCommitCreatesVersionZeroWithItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w, err := NewTable(st, TableSpec{Schema: testSchema()}, Options{})
	require.NoError(t, err)
	objs, err := st.List(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, objs, "nothing is written before the first commit")
	_, err = Load(ctx, st)
	require.ErrorIs(t, err, ErrTableNotFound)

	add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{int64(1), "a", nil}, {int64(2), "b", nil}})
	require.NoError(t, err)
	v, err := w.Commit(ctx, Commit{Operation: "STREAMING UPDATE", Adds: []*Add{add}, Txn: &Txn{AppID: "app", Version: 7}})
	require.NoError(t, err)
	require.Zero(t, v)

	b0, err := st.Get(ctx, CommitKey(0))
	require.NoError(t, err)
	acts, err := DecodeCommitBytes(b0)
	require.NoError(t, err)
	var kinds []string
	for i := range acts {
		kinds = append(kinds, acts[i].Kind())
	}
	require.Equal(t, []string{"commitInfo", "protocol", "metaData", "add", "txn"}, kinds)

	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, stateOf(w.Snapshot()), stateOf(snap))
	tv, ok := snap.TxnVersion("app")
	require.True(t, ok)
	require.EqualValues(t, 7, tv)
	require.Len(t, snap.Files(), 1)

	v, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "app", Version: 8}})
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
	b1, err := st.Get(ctx, CommitKey(1))
	require.NoError(t, err)
	acts, err = DecodeCommitBytes(b1)
	require.NoError(t, err)
	for i := range acts {
		require.Nil(t, acts[i].MetaData, "only version 0 carries the metadata")
		require.Nil(t, acts[i].Protocol)
	}
}

// TestNewTable_AnotherWriterCreatedItFirst_ConflictThenCommitsOnTop: two
// NewTable writers race for version 0; the loser gets a *ConflictError
// naming the winner's txn, builds on the winner's table (its metadata, not
// the one it meant to create), and its retry lands as version 1.
func TestNewTable_AnotherWriterCreatedItFirst_ConflictThenCommitsOnTop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	a, err := NewTable(st, TableSpec{Schema: testSchema()}, Options{})
	require.NoError(t, err)
	b, err := NewTable(st, TableSpec{Schema: testSchema()}, Options{})
	require.NoError(t, err)
	_, err = a.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "app", Version: 5}})
	require.NoError(t, err)

	_, err = b.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "app", Version: 9}})
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	require.True(t, conflict.TxnApplied("app", 5))
	require.False(t, conflict.TxnApplied("app", 9))
	require.Equal(t, a.Snapshot().Metadata().ID, b.Snapshot().Metadata().ID, "the loser builds on the winner's table")
	require.EqualValues(t, 0, b.Version())

	v, err := b.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "app", Version: 9}})
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Len(t, snap.Files(), 2)
	require.Equal(t, stateOf(b.Snapshot()), stateOf(snap))
	require.Equal(t, a.Snapshot().Metadata().ID, snap.Metadata().ID)
	raw, err := st.Get(ctx, CommitKey(1))
	require.NoError(t, err)
	acts, err := DecodeCommitBytes(raw)
	require.NoError(t, err)
	for i := range acts {
		require.Nil(t, acts[i].MetaData, "the retry is an ordinary commit on the winner's table")
	}
}

package delta

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

// TestEachFile_LeanSnapshotWithBaseCheckpoint_ListsEveryLiveFile: a lean
// snapshot keeps only the files since its base checkpoint, yet EachFile
// (what the lake writer's start-up fork check reads bronze's newest event
// through) must yield exactly the live files a full snapshot holds — base
// files included, base files removed since excluded.
func TestEachFile_LeanSnapshotWithBaseCheckpoint_ListsEveryLiveFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	full := newTestTable(t, st)
	var added []string
	for i := 0; i < 12; i++ {
		a := fakeAdd("")
		_, err := full.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{a}})
		require.NoError(t, err)
		k, err := DecodePath(a.Path)
		require.NoError(t, err)
		added = append(added, k)
		if i == 7 {
			_, err := full.Checkpoint(ctx)
			require.NoError(t, err)
		}
	}
	// Remove a base file and a file added after the checkpoint.
	for _, k := range []string{added[2], added[10]} {
		rm, err := full.Remove(k)
		require.NoError(t, err)
		_, err = full.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
		require.NoError(t, err)
	}
	lean, err := OpenWriter(ctx, st, Options{Lean: true})
	require.NoError(t, err)
	snap := lean.Snapshot()
	require.Less(t, snap.NumFiles(), 10, "the lean snapshot holds only the files since its base")

	var got []string
	require.NoError(t, snap.EachFile(ctx, st, func(a *Add) error {
		k, err := DecodePath(a.Path)
		got = append(got, k)
		return err
	}))
	sort.Strings(got)
	var want []string
	for _, a := range full.Snapshot().Files() {
		k, _ := DecodePath(a.Path)
		want = append(want, k)
	}
	sort.Strings(want)
	require.Equal(t, want, got)
	require.Len(t, got, 10)

	stop := errors.New("stop")
	require.ErrorIs(t, snap.EachFile(ctx, st, func(*Add) error { return stop }), stop)
}

// TestTxnCommitInfo_IsTheCommitThatSetTheTxn: the snapshot remembers the
// commitInfo of the commit that set each appId's txn — replayed from JSON,
// or made by the writer itself, whatever commits came after it — and
// knows nothing when the txn came from a checkpoint (the caller then reads
// the log). The lake writer's start-up reads its batch record from it.
func TestTxnCommitInfo_IsTheCommitThatSetTheTxn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st)
	commit := func(n int, txn int64) {
		c := Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Extra: map[string]any{"n": n}}
		if txn > 0 {
			c.Txn = &Txn{AppID: "app", Version: txn}
		}
		_, err := w.Commit(ctx, c)
		require.NoError(t, err)
	}
	nOf := func(s *Snapshot) (int, bool) {
		ci, ok := s.TxnCommitInfo("app")
		if !ok {
			return 0, false
		}
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(ci, &v))
		return v.N, true
	}
	commit(1, 10)
	commit(2, 0) // a later commit without a txn (say, an optimize)
	n, ok := nOf(w.Snapshot())
	require.True(t, ok)
	require.Equal(t, 1, n, "the writer's own commit")
	loaded, err := Load(ctx, st)
	require.NoError(t, err)
	n, ok = nOf(loaded)
	require.True(t, ok)
	require.Equal(t, 1, n, "replayed from the log")

	commit(3, 20)
	_, err = w.Checkpoint(ctx)
	require.NoError(t, err)
	loaded, err = Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, loaded.Version(), loaded.CheckpointVersion())
	_, ok = nOf(loaded)
	require.False(t, ok, "a txn read from a checkpoint has no commitInfo")
	commit(4, 30)
	loaded, err = Load(ctx, st)
	require.NoError(t, err)
	n, ok = nOf(loaded)
	require.True(t, ok)
	require.Equal(t, 4, n, "the commit after the checkpoint")
}

// TestTxnCommitInfo_OtherEngineWritesCommitInfoAfterTheTxn: an engine may
// put commitInfo after the txn in its commit; the txn's commitInfo is then
// found when the commitInfo line is read, and a later commit without a txn
// does not replace it.
func TestTxnCommitInfo_OtherEngineWritesCommitInfoAfterTheTxn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	newTestTable(t, st)
	for v, lines := range map[int64]string{
		1: `{"txn":{"appId":"app","version":7}}` + "\n" + `{"commitInfo":{"operation":"WRITE","n":1}}` + "\n",
		2: `{"commitInfo":{"operation":"OPTIMIZE","n":2}}` + "\n",
	} {
		require.NoError(t, st.PutIfAbsent(ctx, CommitKey(v), []byte(lines)))
	}
	loaded, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(2), loaded.Version())
	ci, ok := loaded.TxnCommitInfo("app")
	require.True(t, ok)
	var got struct{ N int }
	require.NoError(t, json.Unmarshal(ci, &got))
	require.Equal(t, 1, got.N)
	txn, ok := loaded.TxnVersion("app")
	require.True(t, ok)
	require.Equal(t, int64(7), txn)
}

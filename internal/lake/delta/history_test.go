package delta

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

func TestHistoryNewestFirstWithLimitAndCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st)
	for i := 1; i <= 6; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "oml-lakewriter", Version: int64(i)},
			OperationMetrics: map[string]any{"numFiles": "1"}})
		require.NoError(t, err)
		if i == 3 {
			_, err := w.Checkpoint(ctx)
			require.NoError(t, err)
		}
	}
	h, err := History(ctx, st, HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 7)
	require.Equal(t, int64(6), h[0].Version)
	require.Equal(t, "WRITE", h[0].Operation)
	require.Equal(t, []Txn{{AppID: "oml-lakewriter", Version: 6, LastUpdated: h[0].Txns[0].LastUpdated}}, h[0].Txns)
	require.Equal(t, 1, h[0].AddedFiles)
	require.Equal(t, map[string]any{"numFiles": "1"}, h[0].OperationMetrics)
	require.Equal(t, "CREATE TABLE", h[6].Operation)
	require.NotZero(t, h[6].Timestamp)

	h, err = History(ctx, st, HistoryOptions{Limit: 2})
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, int64(5), h[1].Version)

	_, err = CleanupLog(ctx, st, time.Now().Add(60*24*time.Hour))
	require.NoError(t, err)
	h, err = History(ctx, st, HistoryOptions{})
	require.NoError(t, err)
	require.Len(t, h, 4, "commits behind the checkpoint are gone")
	require.Equal(t, int64(3), h[3].Version)

	_, err = History(ctx, store.NewMem(), HistoryOptions{})
	require.ErrorIs(t, err, ErrTableNotFound)
}

// TestHistoryOfForeignTables reads the history of every corpus table whose
// log is readable as commits: no commit fails to parse (commitInfo is
// free-form, e.g. booleans and nulls in operationParameters).
func TestHistoryOfForeignTables(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		h, err := History(context.Background(), goldenStore(t, filepath.Join(dir, e.Dir)), HistoryOptions{})
		require.NoError(t, err, e.Dir)
		require.NotEmpty(t, h, e.Dir)
	}
}

func TestVersionAsOf_LatestCommitAtOrBeforeTimestamp_ModTimeWithoutCommitInfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := store.NewFile(dir)
	require.NoError(t, err)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	w, err := CreateTable(ctx, fs, TableSpec{Schema: testSchema()}, Options{Now: func() time.Time { return now }}) // v0 at t0
	require.NoError(t, err)
	for i := 1; i <= 2; i++ { // v1 at t0+1m, v2 at t0+2m
		now = t0.Add(time.Duration(i) * time.Minute)
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
		require.NoError(t, err)
	}
	// v3 by another engine, with no commitInfo timestamp: its file's
	// modification time counts.
	body, err := EncodeCommit([]Action{{CommitInfo: []byte(`{"operation":"FOREIGN"}`)}})
	require.NoError(t, err)
	require.NoError(t, fs.PutIfAbsent(ctx, CommitKey(3), body))
	require.NoError(t, os.Chtimes(filepath.Join(dir, filepath.FromSlash(CommitKey(3))), t0.Add(3*time.Minute), t0.Add(3*time.Minute)))

	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{t0, 0},
		{t0.Add(time.Minute - time.Millisecond), 0},
		{t0.Add(time.Minute), 1},
		{t0.Add(2*time.Minute + 30*time.Second), 2},
		{t0.Add(3*time.Minute - time.Millisecond), 2},
		{t0.Add(3 * time.Minute), 3},
		{t0.Add(24 * time.Hour), 3},
	} {
		v, err := VersionAsOf(ctx, fs, tc.at)
		require.NoError(t, err, tc.at)
		require.Equal(t, tc.want, v, "as of %s", tc.at)
	}
	_, err = VersionAsOf(ctx, fs, t0.Add(-time.Millisecond))
	require.ErrorIs(t, err, ErrBeforeFirstCommit)
	require.Contains(t, err.Error(), "version 0")

	// A clock that went backwards: v4 stamped t0+30s is the latest commit
	// at or before t0+45s.
	w2, err := OpenWriter(ctx, fs, Options{Now: func() time.Time { return t0.Add(30 * time.Second) }})
	require.NoError(t, err)
	_, err = w2.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	v, err := VersionAsOf(ctx, fs, t0.Add(45*time.Second))
	require.NoError(t, err)
	require.Equal(t, int64(4), v)

	_, err = VersionAsOf(ctx, store.NewMem(), t0)
	require.ErrorIs(t, err, ErrTableNotFound)
}

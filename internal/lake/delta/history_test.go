package delta

import (
	"context"
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

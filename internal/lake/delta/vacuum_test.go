package delta

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

func TestVacuumDeletesOnlyUnreferencedOldFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	schema := &StructType{Fields: []StructField{Field("seq", Prim(TypeLong), false)}}
	w, err := CreateTable(ctx, fs, TableSpec{Schema: schema}, Options{})
	require.NoError(t, err)
	write := func(seq int64) *Add {
		a, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{seq}})
		require.NoError(t, err)
		return a
	}
	live, removed := write(1), write(2)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{live, removed}})
	require.NoError(t, err)
	rk, _ := DecodePath(removed.Path)
	rm, err := w.Remove(rk)
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
	require.NoError(t, err)
	orphan := write(3) // written, never committed (a crashed attempt)
	ok, _ := DecodePath(orphan.Path)
	lk, _ := DecodePath(live.Path)

	// Inside the retention window nothing goes.
	res, err := Vacuum(ctx, fs, VacuumOptions{Now: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, res.Deleted)

	// A shorter retention than the table's is refused unless forced.
	_, err = Vacuum(ctx, fs, VacuumOptions{Retention: time.Hour})
	require.ErrorIs(t, err, ErrRetentionTooShort)

	later := time.Now().Add(8 * 24 * time.Hour)
	res, err = Vacuum(ctx, fs, VacuumOptions{Now: later, DryRun: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{rk, ok}, res.Deleted)
	_, err = fs.Stat(ctx, rk)
	require.NoError(t, err, "a dry run deletes nothing")

	res, err = Vacuum(ctx, fs, VacuumOptions{Now: later})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{rk, ok}, res.Deleted)
	_, err = fs.Stat(ctx, rk)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = fs.Stat(ctx, lk)
	require.NoError(t, err)
	for v := int64(0); v <= 2; v++ {
		_, err = fs.Stat(ctx, CommitKey(v))
		require.NoError(t, err, "the log is never vacuumed")
	}
	snap, err := Load(ctx, fs)
	require.NoError(t, err)
	n := 0
	require.NoError(t, snap.Scan(ctx, fs, ScanOptions{}, func(_ *Add, rows []pq.Row) error { n += len(rows); return nil }))
	require.Equal(t, 1, n)

	forced, err := Vacuum(ctx, fs, VacuumOptions{Retention: time.Nanosecond, Force: true, DryRun: true})
	require.NoError(t, err)
	require.Empty(t, forced.Deleted)
}

func TestCleanupLogOnlyBehindACheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st)
	for i := 1; i <= 9; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: int64(i)}})
		require.NoError(t, err)
		if i == 5 {
			_, err := w.Checkpoint(ctx)
			require.NoError(t, err)
		}
	}
	before, err := Load(ctx, st)
	require.NoError(t, err)
	// Within the retention nothing is deleted.
	res, err := CleanupLog(ctx, st, time.Now())
	require.NoError(t, err)
	require.Empty(t, res.Deleted)

	res, err = CleanupLog(ctx, st, time.Now().Add(31*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(5), res.KeptCheckpoint)
	require.Len(t, res.Deleted, 5) // commits 0..4
	_, err = st.Stat(ctx, CommitKey(5))
	require.NoError(t, err)
	after, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, stateOf(before), stateOf(after))
	_, err = Load(ctx, st, AtVersion(3))
	require.ErrorIs(t, err, ErrVersionNotFound)
	for v := int64(5); v <= 9; v++ {
		_, err = Load(ctx, st, AtVersion(v))
		require.NoError(t, err)
	}
	// A table without a checkpoint is never cleaned.
	st2 := store.NewMem()
	w2 := newTestTable(t, st2)
	_, err = w2.Commit(ctx, Commit{Operation: "WRITE"})
	require.NoError(t, err)
	res, err = CleanupLog(ctx, st2, time.Now().Add(365*24*time.Hour))
	require.NoError(t, err)
	require.Empty(t, res.Deleted)
}

// TestVacuum_RecordsStartAndEndCommits_OnlyWhenItDeletes: a vacuum that
// deletes writes VACUUM START and VACUUM END around the deletions, each a
// commitInfo-only commit (no file, no txn, no data change) with Spark's
// parameters and metrics; a dry run or a vacuum with nothing to delete
// writes nothing.
func TestVacuum_RecordsStartAndEndCommits_OnlyWhenItDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	schema := &StructType{Fields: []StructField{Field("seq", Prim(TypeLong), false)}}
	w, err := CreateTable(ctx, fs, TableSpec{Schema: schema}, Options{})
	require.NoError(t, err)
	a1, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{int64(1)}})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "STREAMING UPDATE", Adds: []*Add{a1}, Txn: &Txn{AppID: "oml-lakewriter", Version: 7},
		Extra: map[string]any{"omlBatch": map[string]any{"start": 0, "end": 7}}})
	require.NoError(t, err)
	orphan, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{int64(2)}}) // never committed
	require.NoError(t, err)
	orphanKey, _ := DecodePath(orphan.Path)
	later := time.Now().Add(8 * 24 * time.Hour)

	// Nothing old enough: no commit.
	res, err := Vacuum(ctx, fs, VacuumOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Deleted)
	require.Equal(t, int64(-1), res.StartVersion)
	// A dry run: no commit either.
	res, err = Vacuum(ctx, fs, VacuumOptions{Now: later, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, []string{orphanKey}, res.Deleted)
	require.Equal(t, int64(-1), res.StartVersion)
	require.Equal(t, int64(-1), res.EndVersion)
	snap, err := Load(ctx, fs)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Version(), "neither an empty vacuum nor a dry run commits")

	res, err = Vacuum(ctx, fs, VacuumOptions{Now: later})
	require.NoError(t, err)
	require.Equal(t, []string{orphanKey}, res.Deleted)
	require.Equal(t, int64(2), res.StartVersion)
	require.Equal(t, int64(3), res.EndVersion)

	for _, v := range []int64{2, 3} {
		body, err := fs.Get(ctx, CommitKey(v))
		require.NoError(t, err)
		acts, err := DecodeCommitBytes(body)
		require.NoError(t, err)
		require.Len(t, acts, 1, "commit %d holds only its commitInfo", v)
		require.True(t, isSet(acts[0].CommitInfo))
	}
	hist, err := History(ctx, fs, HistoryOptions{Limit: 2})
	require.NoError(t, err)
	end, start := hist[0], hist[1]
	require.Equal(t, "VACUUM START", start.Operation)
	require.Equal(t, map[string]any{"retentionCheckEnabled": "true", "specifiedRetentionMillis": nil,
		"defaultRetentionMillis": "604800000"}, start.OperationParameters)
	require.Equal(t, map[string]any{"numFilesToDelete": "1", "sizeOfDataToDelete": fmt.Sprint(orphan.Size)}, start.OperationMetrics)
	require.Equal(t, "VACUUM END", end.Operation)
	require.Equal(t, map[string]any{"status": "COMPLETED"}, end.OperationParameters)
	require.Equal(t, map[string]any{"numDeletedFiles": "1", "numVacuumedDirectories": "0"}, end.OperationMetrics)
	for _, h := range hist {
		require.Empty(t, h.Txns)
		require.Zero(t, h.AddedFiles+h.RemovedFiles)
		require.NotContains(t, string(h.CommitInfo), "omlBatch")
	}

	// The table is unchanged: same live file, same txn version.
	snap, err = Load(ctx, fs)
	require.NoError(t, err)
	require.Equal(t, int64(3), snap.Version())
	require.Len(t, snap.Files(), 1)
	tv, ok := snap.TxnVersion("oml-lakewriter")
	require.True(t, ok)
	require.Equal(t, int64(7), tv)

	// A forced, specified retention is recorded as such.
	o2, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{int64(3)}})
	require.NoError(t, err)
	_ = o2
	res, err = Vacuum(ctx, fs, VacuumOptions{Now: later, Retention: time.Hour, Force: true})
	require.NoError(t, err)
	require.Len(t, res.Deleted, 1)
	hist, err = History(ctx, fs, HistoryOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"retentionCheckEnabled": "false", "specifiedRetentionMillis": "3600000",
		"defaultRetentionMillis": "604800000"}, hist[1].OperationParameters)
}

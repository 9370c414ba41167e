package delta

import (
	"context"
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
	rm, err := w.Remove(rk, true)
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

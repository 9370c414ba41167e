package delta

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

// fullStateStores are the real stores the full-state fences are tested
// on: a file lake and an S3 bucket.
func fullStateStores(t *testing.T) map[string]func() store.Store {
	return map[string]func() store.Store{
		"file": func() store.Store {
			st, err := store.NewFile(t.TempDir())
			require.NoError(t, err)
			return st
		},
		"s3": func() store.Store { return store.MustSub(s3test.NewBucket(t, nil).Store, "t/silver/claims") },
	}
}

// forEachStore runs fn on each store of fullStateStores.
func forEachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	for name, mk := range fullStateStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, mk())
		})
	}
}

// mergeOnce is a MERGE as the lake writer's silver makes it: the first
// live file is read, rewritten with one more row and replaced, under the
// txn at version txn.
func mergeOnce(t testing.TB, w *Writer, txn int64) int64 {
	t.Helper()
	ctx := context.Background()
	snap := w.Snapshot()
	old := snap.Files()[0]
	var rows []pq.Row
	require.NoError(t, snap.Scan(ctx, w.Store(), ScanOptions{Files: []*Add{old}}, func(_ *Add, batch []pq.Row) error {
		rows = append(rows, snap.DataRows(batch)...)
		return nil
	}))
	rows = append(rows, pq.Row{txn * 1000, fmt.Sprint("merged ", txn)})
	add, err := w.WriteFile(ctx, old.PartitionValues, rows)
	require.NoError(t, err)
	rm, err := w.Remove(old.Path)
	require.NoError(t, err)
	v, err := w.Commit(ctx, Commit{Operation: "MERGE", Adds: []*Add{add}, Removes: []*Remove{rm},
		Txn: &Txn{AppID: stateApp, Version: txn}})
	require.NoError(t, err)
	return v
}

// fullTableState makes a partitioned table with real files on st (ten
// appends, optimizeTable), MERGEs into it once, and returns its full
// writer and that writer's state.
func fullTableState(t testing.TB, st store.Store) (*Writer, *TableState) {
	t.Helper()
	w := optimizeTable(t, st)
	mergeOnce(t, w, 11)
	ts := stateOfWriter(t, w)
	require.True(t, ts.Full())
	return w, ts
}

// requireFullEqualsLog: a full writer's snapshot equals a load of the log
// at its version, files with their stats, tombstones and txns, and its
// files scan. A snapshot rebuilt from a state holds only the tombstones
// of its commits since (TombstonesComplete false): those are the log's.
func requireFullEqualsLog(t *testing.T, st store.Store, w *Writer) {
	t.Helper()
	ctx := context.Background()
	snap := w.Snapshot()
	require.False(t, snap.Lean())
	want, err := Load(ctx, st, AtVersion(snap.Version()))
	require.NoError(t, err)
	wantState, gotState := stateOf(want), stateOf(snap)
	if !snap.TombstonesComplete() {
		require.Subset(t, wantState.Tombstones, gotState.Tombstones, "the removes since the rebuild are the log's")
		wantState.Tombstones, gotState.Tombstones = nil, nil
	}
	require.Equal(t, wantState, gotState)
	require.Equal(t, want.Metadata(), snap.Metadata())
	if gotInfo, ok := snap.TxnCommitInfo(stateApp); ok {
		// A state keeps no commitInfo; a writer that committed since
		// has its own commit's, which the log's replay has too.
		all, err := Load(ctx, st, AtVersion(snap.Version()))
		require.NoError(t, err)
		if wantInfo, ok := all.TxnCommitInfo(stateApp); ok {
			require.Equal(t, string(wantInfo), string(gotInfo))
		}
	}
	require.NoError(t, snap.Scan(ctx, st, ScanOptions{}, func(*Add, []pq.Row) error { return nil }), "every live file is there")
}

// TestFullTableState_RebuiltWriter_MergesAndCheckpointsEqualAReplay: a
// full writer's state is taken after every MERGE (a remove and an add),
// before and after its checkpoints; the writer rebuilt from each state
// MERGEs and checkpoints on, and every snapshot equals a load of the log
// and every checkpoint a JSON replay.
func TestFullTableState_RebuiltWriter_MergesAndCheckpointsEqualAReplay(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		w, ts := fullTableState(t, st)
		w.opts.CheckpointInterval = 3
		opts := Options{CheckpointInterval: 3}
		checkpoints := 0
		for i := int64(12); i <= 24; i++ {
			w = reopen(t, st, ts, opts, true)
			requireFullEqualsLog(t, st, w)
			mergeOnce(t, w, i)
			if done, _, err := w.MaybeCheckpoint(ctx); err == nil && done {
				checkpoints++
			} else {
				require.NoError(t, err)
			}
			ts = stateOfWriter(t, w)
		}
		require.Greater(t, checkpoints, 2)
		w = reopen(t, st, ts, opts, true)
		requireFullEqualsLog(t, st, w)
		all, err := Load(ctx, st, jsonOnlyAt(w.Version()))
		require.NoError(t, err)
		fromCheckpoints, err := Load(ctx, st)
		require.NoError(t, err)
		require.Equal(t, stateOf(all), stateOf(fromCheckpoints), "the rebuilt writers' checkpoints equal a JSON replay")
	})
}

// TestFullTableState_RebuiltWritersCheckpoint_CarriesEveryTombstone: a
// state keeps no tombstones, yet the checkpoint a rebuilt writer writes
// must carry every remove within the retention, the ones before the
// rebuild included: the checkpoint file alone holds the JSON replay's
// live files and tombstones.
func TestFullTableState_RebuiltWritersCheckpoint_CarriesEveryTombstone(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		w, ts := fullTableState(t, st)
		for i := int64(12); i <= 15; i++ {
			w = reopen(t, st, ts, Options{}, true)
			require.False(t, w.Snapshot().TombstonesComplete())
			mergeOnce(t, w, i)
			ts = stateOfWriter(t, w)
		}
		w = reopen(t, st, ts, Options{}, true)
		res, err := w.Checkpoint(ctx)
		require.NoError(t, err)
		require.True(t, w.Snapshot().TombstonesComplete())
		all, err := Load(ctx, st, jsonOnlyAt(w.Version()))
		require.NoError(t, err)
		require.GreaterOrEqual(t, all.NumTombstones(), 5, "every MERGE left a remove")
		var files, tombs []string
		require.NoError(t, readCheckpoint(ctx, st, &checkpointRef{version: res.Version, keys: []string{CheckpointKey(res.Version)}}, func(a *Action) error {
			switch {
			case a.Add != nil:
				files = append(files, a.Add.Path)
			case a.Remove != nil:
				tombs = append(tombs, a.Remove.Path)
			}
			return nil
		}))
		var wantFiles, wantTombs []string
		for _, a := range all.Files() {
			wantFiles = append(wantFiles, a.Path)
		}
		for _, r := range all.Tombstones() {
			wantTombs = append(wantTombs, r.Path)
		}
		require.ElementsMatch(t, wantFiles, files)
		require.ElementsMatch(t, wantTombs, tombs, "the checkpoint carries the tombstones from before the rebuild")
	})
}

// TestFullTableState_AnotherWriterCommittedSince_ReopensFromTheLog: a
// second lake writer MERGEd after the state was taken: the state's commit
// is no longer the newest, so the file list the state holds is not the
// table's and the reopen reads the log (a lean state would be used, its
// first commit losing the race).
func TestFullTableState_AnotherWriterCommittedSince_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		_, ts := fullTableState(t, st)
		other, err := OpenWriter(context.Background(), st, Options{})
		require.NoError(t, err)
		mergeOnce(t, other, 12)
		again := reopen(t, st, ts, Options{}, false)
		require.Equal(t, other.Version(), again.Version())
		requireFullEqualsLog(t, st, again)
		mergeOnce(t, again, 13)
		requireFullEqualsLog(t, st, again)
	})
}

// TestFullTableState_OptimizedSince_ReopensFromTheLog: maintenance
// compacted the table (every file the state lists is removed): the
// reopen reads the log and MERGEs into the compacted files.
func TestFullTableState_OptimizedSince_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		_, ts := fullTableState(t, st)
		m, err := OpenWriter(ctx, st, Options{})
		require.NoError(t, err)
		res, err := Optimize(ctx, m, OptimizeOptions{})
		require.NoError(t, err)
		require.Positive(t, res.FilesRemoved)
		again := reopen(t, st, ts, Options{}, false)
		require.Equal(t, res.Version, again.Version())
		requireFullEqualsLog(t, st, again)
		mergeOnce(t, again, 12)
		requireFullEqualsLog(t, st, again)
	})
}

// TestFullTableState_ErasureRewroteFilesSince_ReopensFromTheLog: an
// erasure rewrote a file without the erased rows: the state lists the
// file that still holds them, and the reopen reads the log instead, so a
// MERGE never copies erased rows back.
func TestFullTableState_ErasureRewroteFilesSince_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		_, ts := fullTableState(t, st)
		e, err := OpenWriter(ctx, st, Options{})
		require.NoError(t, err)
		snap := e.Snapshot()
		old := snap.Files()[0]
		var kept []pq.Row
		require.NoError(t, snap.Scan(ctx, st, ScanOptions{Files: []*Add{old}}, func(_ *Add, batch []pq.Row) error {
			kept = append(kept, snap.DataRows(batch)[1:]...) // the first row erased
			return nil
		}))
		add, err := e.WriteFile(ctx, old.PartitionValues, kept)
		require.NoError(t, err)
		rm, err := e.Remove(old.Path)
		require.NoError(t, err)
		v, err := e.Commit(ctx, Commit{Operation: "DELETE", Adds: []*Add{add}, Removes: []*Remove{rm}})
		require.NoError(t, err)

		again := reopen(t, st, ts, Options{}, false)
		require.Equal(t, v, again.Version())
		_, stillLive := again.Snapshot().File(old.Path)
		require.False(t, stillLive, "the erased file is not the rebuilt writer's")
		requireFullEqualsLog(t, st, again)
	})
}

// TestFullTableState_RepairedSince_ReopensFromTheLogOfTheNewTable: the
// table was deleted and rebuilt up to the same version (a repair): the
// commit at the state's version is another table's, the fingerprint
// differs, and the writer is the new table's.
func TestFullTableState_RepairedSince_ReopensFromTheLogOfTheNewTable(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		_, ts := fullTableState(t, st)
		deleteAll(t, st)
		rebuilt := optimizeTable(t, st)
		mergeOnce(t, rebuilt, 11)
		require.Equal(t, ts.Version(), rebuilt.Version())
		again := reopen(t, st, ts, Options{}, false)
		require.Equal(t, rebuilt.Snapshot().Metadata().ID, again.Snapshot().Metadata().ID)
		requireFullEqualsLog(t, st, again)
	})
}

// TestFullTableState_LogCleanedUpPastIt_ReopensFromTheLog: other writers
// committed and checkpointed, and log cleanup deleted the state's
// commit: the reopen reads the log.
func TestFullTableState_LogCleanedUpPastIt_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		_, ts := fullTableState(t, st)
		other, err := OpenWriter(ctx, st, Options{})
		require.NoError(t, err)
		mergeOnce(t, other, 12)
		_, err = other.Checkpoint(ctx)
		require.NoError(t, err)
		res, err := CleanupLog(ctx, st, time.Now().Add(365*24*time.Hour))
		require.NoError(t, err)
		require.NotEmpty(t, res.Deleted)
		again := reopen(t, st, ts, Options{}, false)
		require.Equal(t, other.Version(), again.Version())
		requireFullEqualsLog(t, st, again)
	})
}

// TestFullTableState_CheckpointAtItsVersion_IsUsed: maintenance wrote a
// checkpoint at the state's version and nothing else: the table is
// unchanged, so the state is used, and the rebuilt writer's snapshot and
// its next checkpoint equal a replay.
func TestFullTableState_CheckpointAtItsVersion_IsUsed(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		_, ts := fullTableState(t, st)
		_, err := Checkpoint(ctx, st)
		require.NoError(t, err)
		again := reopen(t, st, ts, Options{}, true)
		requireFullEqualsLog(t, st, again)
		mergeOnce(t, again, 12)
		_, err = again.Checkpoint(ctx)
		require.NoError(t, err)
		fromCheckpoint, err := Load(ctx, st)
		require.NoError(t, err)
		all, err := Load(ctx, st, jsonOnlyAt(again.Version()))
		require.NoError(t, err)
		require.Equal(t, stateOf(all), stateOf(fromCheckpoint))
	})
}

// TestFullTableState_TableDeletedSince_FindsItGone: the table was
// deleted: the reopen reads the log and finds no table.
func TestFullTableState_TableDeletedSince_FindsItGone(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		_, ts := fullTableState(t, st)
		deleteAll(t, st)
		_, fromState, err := ReopenWriter(context.Background(), st, ts, Options{})
		require.ErrorIs(t, err, ErrTableNotFound)
		require.False(t, fromState)
	})
}

// TestFullTableState_TooManyFilesOrOtherOptions_NoneOrTheLog: a full
// writer with more than MaxStateFiles files and tombstones gives no
// state, and a state reopened with the other leanness reads the log.
func TestFullTableState_TooManyFilesOrOtherOptions_NoneOrTheLog(t *testing.T) {
	t.Parallel()
	st := store.NewMem()
	w := newTestTable(t, st)
	adds := make([]*Add, MaxStateFiles)
	for i := range adds {
		adds[i] = fakeAdd("")
	}
	_, err := w.Commit(context.Background(), Commit{Operation: "WRITE", Adds: adds})
	require.NoError(t, err)
	ts := stateOfWriter(t, w)
	require.True(t, ts.Full())
	require.Positive(t, ts.ApproxBytes()-int64(MaxStateFiles)*100)
	reopen(t, st, ts, leanOpts(100), false)
	commitTxn(t, w, 1)
	_, ok := w.State()
	require.False(t, ok, "past MaxStateFiles")
}

// BenchmarkReopenFullWriter is one reopen of a MERGE table (a partitioned
// table with real files, ten appends and a MERGE since its creation, on a
// file store): from its full state (ReopenWriter: one read, one stat)
// against from its log (OpenWriter: a listing, the checkpoint hint, every
// commit decoded).
//
//	go test -run '^$' -bench BenchmarkReopenFullWriter -benchmem ./internal/lake/delta/
func BenchmarkReopenFullWriter(b *testing.B) {
	st, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	_, ts := fullTableState(b, st)
	ctx := context.Background()
	b.Run("from=state", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			if _, fromState, err := ReopenWriter(ctx, st, ts, Options{}); err != nil || !fromState {
				b.Fatal(err, fromState)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("from=log", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			if _, err := OpenWriter(ctx, st, Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// processCPU is the process's user and system CPU time so far (a shared
// machine's wall time says little).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

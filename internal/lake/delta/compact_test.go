package delta

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

const stateApp = "oml-lakewriter"

// leanOpts are the options of the lake writer's lean tables in these tests.
func leanOpts(interval int) Options { return Options{Lean: true, CheckpointInterval: interval} }

// commitTxn commits one file with the txn at version txn, catching up and
// retrying after lost races; it returns the version committed.
func commitTxn(t *testing.T, w *Writer, txn int64) int64 {
	t.Helper()
	for {
		v, err := w.Commit(context.Background(), Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: stateApp, Version: txn}})
		var ce *ConflictError
		if errors.As(err, &ce) {
			continue
		}
		require.NoError(t, err)
		return v
	}
}

// stateOfWriter takes w's state, which it must have.
func stateOfWriter(t testing.TB, w *Writer) *TableState {
	t.Helper()
	ts, ok := w.State()
	require.True(t, ok, "the writer gives a state")
	return &ts
}

// leanTableState makes a new table in an in-memory store, commits txn to
// it with a lean writer and returns the store and that writer's state.
func leanTableState(t *testing.T, txn int64) (store.Store, *TableState) {
	t.Helper()
	st := store.NewMem()
	newTestTable(t, st)
	w, err := OpenWriter(context.Background(), st, leanOpts(100))
	require.NoError(t, err)
	commitTxn(t, w, txn)
	return st, stateOfWriter(t, w)
}

// reopen rebuilds a writer from ts and requires that the fence passed
// (fromState) or failed (!fromState).
func reopen(t *testing.T, st store.Store, ts *TableState, opts Options, fromState bool) *Writer {
	t.Helper()
	w, got, err := ReopenWriter(context.Background(), st, ts, opts)
	require.NoError(t, err)
	require.Equal(t, fromState, got, "rebuilt from the state")
	return w
}

// requireEqualsLog: the writer's snapshot, files streamed, equals a full
// load of the log at its version, which equals a JSON replay (when the log
// still starts at 0): the checkpoints written are right.
func requireEqualsLog(t *testing.T, st store.Store, w *Writer) {
	t.Helper()
	ctx := context.Background()
	snap := w.Snapshot()
	want, err := Load(ctx, st, AtVersion(snap.Version()))
	require.NoError(t, err)
	var got []string
	require.NoError(t, snap.EachFile(ctx, st, func(a *Add) error { got = append(got, a.Path); return nil }))
	sort.Strings(got)
	var wantPaths []string
	for _, a := range want.Files() {
		wantPaths = append(wantPaths, a.Path)
	}
	require.Equal(t, wantPaths, got, "live files at version %d", snap.Version())
	require.Equal(t, want.Txns(), snap.Txns(), "txns at version %d", snap.Version())
	require.Equal(t, want.Metadata(), snap.Metadata())
	require.Equal(t, want.Protocol(), snap.Protocol())
	if _, err := st.Stat(ctx, CommitKey(0)); err != nil {
		return // log cleanup removed the start: no JSON replay to compare with
	}
	all, err := Load(ctx, st, jsonOnlyAt(snap.Version()))
	require.NoError(t, err)
	require.Equal(t, stateOf(all), stateOf(want), "the newest checkpoint equals a JSON replay")
}

// TestTableState_RebuiltWriter_CommitsAndCheckpointsEqualAReplay: a lean
// writer's state is taken after every commit, before and after its
// checkpoints, while a full writer removes files (some only a base
// checkpoint holds); the writer rebuilt from each state commits and
// checkpoints, and every snapshot and checkpoint equals a JSON replay.
func TestTableState_RebuiltWriter_CommitsAndCheckpointsEqualAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	full := newTestTable(t, st)
	w, err := OpenWriter(ctx, st, leanOpts(3))
	require.NoError(t, err)
	checkpoints, rebuilt := 0, 0
	for i := int64(1); i <= 30; i++ {
		commitTxn(t, w, i)
		if done, _, err := w.MaybeCheckpoint(ctx); err == nil && done {
			checkpoints++
		} else {
			require.NoError(t, err)
		}
		if i%4 == 0 {
			_, err := full.Refresh(ctx)
			require.NoError(t, err)
			files := full.Snapshot().Files()
			rm, err := full.Remove(files[0].Path)
			require.NoError(t, err)
			_, err = full.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
			require.NoError(t, err)
		}
		ts, ok := w.State()
		if !ok {
			continue // loaded from a checkpoint without a commit after it
		}
		rebuilt++
		w = reopen(t, st, &ts, leanOpts(3), true)
		require.Equal(t, ts.Version(), w.Version())
		v, ok := w.Snapshot().TxnVersion(stateApp)
		require.True(t, ok)
		require.Equal(t, i, v)
		requireEqualsLog(t, st, w)
	}
	require.Greater(t, checkpoints, 5)
	require.Greater(t, rebuilt, 20)
	_, err = w.Checkpoint(ctx)
	require.NoError(t, err)
	requireEqualsLog(t, st, w)
}

// TestTableState_AnotherWriterCommittedSince_RebuiltWriterLosesTheRaceAndCatchesUp:
// another writer commits the next version (applying the same batch) after
// the state was taken: the rebuilt writer's commit loses the put-if-absent
// race, catches up from the log, and reports that the winner applied it.
func TestTableState_AnotherWriterCommittedSince_RebuiltWriterLosesTheRaceAndCatchesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, ts := leanTableState(t, 1)

	other, err := OpenWriter(ctx, st, leanOpts(100))
	require.NoError(t, err)
	commitTxn(t, other, 2)

	again := reopen(t, st, ts, leanOpts(100), true)
	_, err = again.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: stateApp, Version: 2}})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.TxnApplied(stateApp, 2), "the winner applied this batch")
	v, _ := again.Snapshot().TxnVersion(stateApp)
	require.EqualValues(t, 2, v)
	require.Equal(t, other.Version(), again.Version())
	commitTxn(t, again, 3)
	requireEqualsLog(t, st, again)
}

// TestTableState_CheckpointWrittenByAnotherProcessSince_RebuiltWriterCheckpointsEqualAReplay:
// maintenance checkpointed the table (at the state's version, then later)
// after the state was taken: the rebuilt writer commits on and its own
// checkpoints equal a replay.
func TestTableState_CheckpointWrittenByAnotherProcessSince_RebuiltWriterCheckpointsEqualAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	newTestTable(t, st)
	w, err := OpenWriter(ctx, st, leanOpts(4))
	require.NoError(t, err)
	for i := int64(1); i <= 6; i++ {
		commitTxn(t, w, i)
		_, _, err := w.MaybeCheckpoint(ctx)
		require.NoError(t, err)
	}
	ts := stateOfWriter(t, w)
	_, err = Checkpoint(ctx, st) // another process, at the state's version
	require.NoError(t, err)
	again := reopen(t, st, ts, leanOpts(4), true)
	for i := int64(7); i <= 12; i++ {
		commitTxn(t, again, i)
		_, _, err := again.MaybeCheckpoint(ctx)
		require.NoError(t, err)
		requireEqualsLog(t, st, again)
	}
}

// TestTableState_TableDeletedSince_ReopensFromTheLogAndFindsItGone: the
// table was deleted after the state was taken: the fence finds the
// state's commit gone and the reopen reads the log, which says the table
// is gone (a rebuilt writer would have put the next version into an
// empty log).
func TestTableState_TableDeletedSince_ReopensFromTheLogAndFindsItGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, ts := leanTableState(t, 1)
	deleteAll(t, st)
	_, fromState, err := ReopenWriter(ctx, st, ts, leanOpts(100))
	require.ErrorIs(t, err, ErrTableNotFound)
	require.False(t, fromState)
}

// TestTableState_TableRebuiltSince_ReopensFromTheLogOfTheNewTable: the
// table was deleted and created again up to the same version (a repair):
// the commit at the state's version is another table's, the fence sees
// different bytes and the writer is the new table's, from its log.
func TestTableState_TableRebuiltSince_ReopensFromTheLogOfTheNewTable(t *testing.T) {
	t.Parallel()
	st, ts := leanTableState(t, 7)
	deleteAll(t, st)
	rebuilt := newTestTable(t, st)
	commitTxn(t, rebuilt, 3)
	require.Equal(t, ts.Version(), rebuilt.Version())

	again := reopen(t, st, ts, leanOpts(100), false)
	require.Equal(t, rebuilt.Snapshot().Metadata().ID, again.Snapshot().Metadata().ID)
	v, _ := again.Snapshot().TxnVersion(stateApp)
	require.EqualValues(t, 3, v, "the new table's txn, not the state's")
	requireEqualsLog(t, st, again)
}

// TestTableState_LogCleanedUpPastIt_ReopensFromTheLog: other writers
// committed, checkpointed, and log cleanup deleted the commits up to that
// checkpoint, the state's among them: the fence sees the state's commit
// gone (a put of the next version would have succeeded where cleanup
// deleted it) and the writer is opened from the log.
func TestTableState_LogCleanedUpPastIt_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, ts := leanTableState(t, 1)
	other, err := OpenWriter(ctx, st, leanOpts(100))
	require.NoError(t, err)
	for i := int64(2); i <= 5; i++ {
		commitTxn(t, other, i)
	}
	_, err = other.Checkpoint(ctx)
	require.NoError(t, err)
	res, err := CleanupLog(ctx, st, time.Now().Add(365*24*time.Hour))
	require.NoError(t, err)
	require.NotEmpty(t, res.Deleted)

	again := reopen(t, st, ts, leanOpts(100), false)
	require.Equal(t, other.Version(), again.Version())
	commitTxn(t, again, 6)
	requireEqualsLog(t, st, again)
}

// TestTableState_WriterInUseOrStale_GivesNone: a writer in the middle of a
// commit (its lock held) or one that must re-read the log first gives no
// state.
func TestTableState_WriterInUseOrStale_GivesNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	newTestTable(t, st)
	w, err := OpenWriter(ctx, st, leanOpts(100))
	require.NoError(t, err)
	commitTxn(t, w, 1)
	w.mu.Lock()
	_, ok := w.State()
	w.mu.Unlock()
	require.False(t, ok, "in use")
	w.stale = true
	_, ok = w.State()
	require.False(t, ok, "stale")
}

// TestTableState_TablesOfAKind_ShareOneShapeAndKeepTheirOwnMetadata: the
// tables of a kind (one schema, names the same, descriptions and ids
// their own) share one interned shape, and each rebuilt writer has
// exactly its own table's metadata.
func TestTableState_TablesOfAKind_ShareOneShapeAndKeepTheirOwnMetadata(t *testing.T) {
	t.Parallel()
	var shape *tableShape
	for i := range 20 {
		st := store.NewMem()
		spec := TableSpec{Schema: testSchema(), Name: "bronze", Description: "table " + strconv.Itoa(i),
			Configuration: map[string]string{"delta.appendOnly": "true"}}
		w, err := NewTable(st, spec, leanOpts(100))
		require.NoError(t, err)
		commitTxn(t, w, 1)
		ts := stateOfWriter(t, w)
		if shape == nil {
			shape = ts.shape
		}
		require.Same(t, shape, ts.shape, "one shape for every table of the kind")
		again := reopen(t, st, ts, leanOpts(100), true)
		requireEqualsLog(t, st, again)
		require.Equal(t, "table "+strconv.Itoa(i), *again.Snapshot().Metadata().Description)
	}
}

func deleteAll(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	objs, err := st.List(ctx, "", "")
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, st.Delete(ctx, o.Key))
	}
}

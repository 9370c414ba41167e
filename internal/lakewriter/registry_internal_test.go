package lakewriter

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// TestRegistry_ByteBudget_ClosesLeastRecentlyUsedWriters: with a byte
// budget (--memory) the open writers' estimated snapshot bytes stay within
// it, the least recently used writer is closed first, and the writer in
// use is never closed however large it is.
func TestRegistry_ByteBudget_ClosesLeastRecentlyUsedWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r := newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1000})
	keys := make([]tables.TableKey, 6)
	var one int64
	for i := range keys {
		keys[i] = tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
		w, err := r.writer(ctx, keys[i], createMissing)
		require.NoError(t, err)
		one = w.ApproxBytes()
	}
	require.Positive(t, one)
	open, _ := r.stats()
	require.Equal(t, 6, open, "no budget: only --max-open-tables bounds them")

	r = newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1000})
	r.budget = 3*one + one/2 // room for three writers
	for _, k := range keys {
		_, err := r.writer(ctx, k, createMissing)
		require.NoError(t, err)
		require.LessOrEqual(t, r.openBytes(), r.budget)
	}
	open, ev := r.stats()
	require.Equal(t, 3, open)
	require.EqualValues(t, 3, ev)
	for _, k := range keys[:3] {
		_, ok := r.cached(k)
		require.False(t, ok, "the least recently used writers were closed")
	}
	for _, k := range keys[3:] {
		_, ok := r.cached(k)
		require.True(t, ok)
	}

	r.budget = 1 // smaller than any writer: the one in use stays
	_, err := r.writer(ctx, keys[0], createMissing)
	require.NoError(t, err)
	open, _ = r.stats()
	require.Equal(t, 1, open)
	_, ok := r.cached(keys[0])
	require.True(t, ok)
}

// commitOne commits one (unread) file with the lake writer's txn at
// version txn through w.
func commitOne(ctx context.Context, w *delta.Writer, txn int64) (int64, error) {
	add := &delta.Add{Path: "part-" + uuid.NewString() + ".parquet", PartitionValues: map[string]*string{}, Size: 1, DataChange: true}
	return w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add}, Txn: &delta.Txn{AppID: tables.AppID, Version: txn}})
}

// evictedTable creates bronze table a through a registry that keeps one
// writer open, commits txn 1 to it, and evicts it by opening table b.
func evictedTable(t *testing.T, lake store.Store) (r *registry, a, b tables.TableKey) {
	t.Helper()
	ctx := context.Background()
	r = newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1})
	a = tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
	b = tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	_, err = commitOne(ctx, w, 1)
	require.NoError(t, err)
	r.resized(a, w)
	_, err = r.writer(ctx, b, createMissing)
	require.NoError(t, err)
	c := r.counts()
	require.Equal(t, 1, c.Open)
	require.Equal(t, 1, c.States, "the evicted lean writer left its compact state")
	return r, a, b
}

// TestRegistry_EvictedLeanTable_ReopensFromItsCompactStateWithoutListingItsLog:
// reopening an evicted bronze table reads one object (its newest commit,
// the fence) instead of listing its log, and the writer is the one the
// log gives.
func TestRegistry_EvictedLeanTable_ReopensFromItsCompactStateWithoutListingItsLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r, a, _ := evictedTable(t, lake)
	before := len(lake.Trace())
	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	var ops []string
	for _, e := range lake.Trace()[before:] {
		ops = append(ops, fmt.Sprint(e.Op, " ", e.Key))
	}
	require.Equal(t, []string{fmt.Sprint(store.OpGet, " ", a.Path()+"/"+delta.CommitKey(0))}, ops, "one read of the state's commit")
	c := r.counts()
	require.EqualValues(t, 1, c.StateOpens)
	require.Zero(t, c.States, "the state is taken by the writer it became")

	st, err := a.Store(lake)
	require.NoError(t, err)
	fromLog, err := delta.OpenWriter(ctx, st, delta.Options{Lean: true})
	require.NoError(t, err)
	require.Equal(t, fromLog.Version(), w.Version())
	require.Equal(t, fromLog.Snapshot().Txns(), w.Snapshot().Txns())
	require.Equal(t, fromLog.Snapshot().Metadata().ID, w.Snapshot().Metadata().ID)
	v, err := commitOne(ctx, w, 2)
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
}

// TestRegistry_EvictedTableCommittedByAnotherWriter_CompactReopenLosesTheRaceAndRereadsTheLog:
// another lake writer committed the next batch to an evicted table: the
// writer rebuilt from the compact state loses the put-if-absent race on
// the next version, reads the log, and learns that the batch is applied;
// the next batch commits after the winner.
func TestRegistry_EvictedTableCommittedByAnotherWriter_CompactReopenLosesTheRaceAndRereadsTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r, a, _ := evictedTable(t, lake)
	st, err := a.Store(lake)
	require.NoError(t, err)
	other, err := delta.OpenWriter(ctx, st, delta.Options{Lean: true})
	require.NoError(t, err)
	_, err = commitOne(ctx, other, 2)
	require.NoError(t, err)

	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.EqualValues(t, 1, r.counts().StateOpens, "rebuilt from its state")
	_, err = commitOne(ctx, w, 2)
	var ce *delta.ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.TxnApplied(tables.AppID, 2))
	txn, _ := w.Snapshot().TxnVersion(tables.AppID)
	require.EqualValues(t, 2, txn, "caught up from the log")
	v, err := commitOne(ctx, w, 3)
	require.NoError(t, err)
	require.EqualValues(t, 2, v)
}

// TestRegistry_EvictedTableDeletedByAnotherProcess_CompactReopenReadsTheLogAndFindsItGone:
// the evicted table was removed (a restore, an operator): the state's
// fence fails and the reopen reads the log, so the table is missing (left
// missing, or created anew from version 0), never continued at the
// state's next version in an empty log.
func TestRegistry_EvictedTableDeletedByAnotherProcess_CompactReopenReadsTheLogAndFindsItGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r, a, _ := evictedTable(t, lake)
	objs, err := lake.List(ctx, a.Path()+"/", "")
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, lake.Delete(ctx, o.Key))
	}
	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.Zero(t, r.counts().StateOpens)
	v, err := commitOne(ctx, w, 2)
	require.NoError(t, err)
	require.Zero(t, v, "the table is created again at version 0")
}

// TestRegistry_WriterEvictedDuringItsCommit_StateFollowsTheCommit: a
// writer evicted while its goroutine still used it gives the state it had
// then; the commit it makes afterwards replaces that state (resized), so
// the rebuilt writer does not start behind its own commit.
func TestRegistry_WriterEvictedDuringItsCommit_StateFollowsTheCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r, a, b := evictedTable(t, lake)
	w, err := r.writer(ctx, a, createMissing) // a back, b evicted
	require.NoError(t, err)
	_, err = r.writer(ctx, b, createMissing) // a evicted while "in use" below
	require.NoError(t, err)
	_, err = commitOne(ctx, w, 2)
	require.NoError(t, err)
	r.resized(a, w)

	again, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.EqualValues(t, 2, r.counts().StateOpens)
	require.Equal(t, w.Version(), again.Version(), "the state is the commit's, not the eviction's")
	_, err = commitOne(ctx, again, 3)
	require.NoError(t, err, "no race lost against its own earlier commit")
}

// TestRegistry_ForgottenTable_KeepsNoCompactState: a forgotten table (its
// writer's state cannot be trusted) is reopened from its log.
func TestRegistry_ForgottenTable_KeepsNoCompactState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r, a, _ := evictedTable(t, lake)
	r.forget(a)
	require.Zero(t, r.counts().States)
	_, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.Zero(t, r.counts().StateOpens)
}

// evictedMergeTable creates a table of kind (silver or gold/workareas) on
// a file lake through a registry that keeps one writer open, commits txn
// 1 and 2 to it, and evicts it by opening a bronze table.
func evictedMergeTable(t *testing.T, kind tables.Kind) (lake store.Store, r *registry, a tables.TableKey) {
	t.Helper()
	ctx := context.Background()
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	r = newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1})
	a = tables.TableKey{Tenant: uuid.New(), Kind: kind}
	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	for txn := int64(1); txn <= 2; txn++ {
		_, err = commitOne(ctx, w, txn)
		require.NoError(t, err)
		r.resized(a, w)
	}
	_, err = r.writer(ctx, tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, createMissing)
	require.NoError(t, err)
	ts, ok := r.states[a]
	require.True(t, ok, "the evicted %s writer left its compact state", kind)
	require.True(t, ts.Full(), "with its file list")
	return lake, r, a
}

// TestRegistry_EvictedMergeTable_ReopensFromItsFileListWithoutListingItsLog:
// an evicted silver or gold/workareas table is rebuilt from its state
// (its commit read back, the next one looked for) with the file list,
// stats and txns a load of its log gives, and commits on.
func TestRegistry_EvictedMergeTable_ReopensFromItsFileListWithoutListingItsLog(t *testing.T) {
	t.Parallel()
	for _, kind := range []tables.Kind{tables.Silver, tables.Workareas} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			lake, r, a := evictedMergeTable(t, kind)
			w, err := r.writer(ctx, a, createMissing)
			require.NoError(t, err)
			c := r.counts()
			require.EqualValues(t, 1, c.StateOpens)
			require.EqualValues(t, 2, c.LogOpens, "only the two bronze tables read their (empty) logs")

			st, err := a.Store(lake)
			require.NoError(t, err)
			fromLog, err := delta.OpenWriter(ctx, st, delta.Options{})
			require.NoError(t, err)
			require.Equal(t, fromLog.Version(), w.Version())
			require.Equal(t, fromLog.Snapshot().Files(), w.Snapshot().Files())
			require.Equal(t, fromLog.Snapshot().Txns(), w.Snapshot().Txns())
			require.Equal(t, fromLog.Snapshot().Metadata(), w.Snapshot().Metadata())
			v, err := commitOne(ctx, w, 3)
			require.NoError(t, err)
			require.EqualValues(t, 2, v)
		})
	}
}

// TestRegistry_EvictedMergeTableCommittedByAnotherWriter_ReopensFromTheLog:
// another lake writer committed to the evicted silver table: its state's
// commit is not the newest any more, so the reopen reads the log (its file
// list is not the table's) and the next batch commits after the winner.
func TestRegistry_EvictedMergeTableCommittedByAnotherWriter_ReopensFromTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake, r, a := evictedMergeTable(t, tables.Silver)
	st, err := a.Store(lake)
	require.NoError(t, err)
	other, err := delta.OpenWriter(ctx, st, delta.Options{})
	require.NoError(t, err)
	_, err = commitOne(ctx, other, 3)
	require.NoError(t, err)

	w, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.Zero(t, r.counts().StateOpens, "read from the log")
	require.Equal(t, other.Snapshot().Files(), w.Snapshot().Files())
	v, err := commitOne(ctx, w, 4)
	require.NoError(t, err)
	require.EqualValues(t, 3, v)
}

// TestRegistry_MergeStates_BoundedPerTableAndOffWithLeanStatesOnly: a
// MERGE table whose state would take more than maxStateShare of the
// budget keeps none, and leanStatesOnly keeps none of theirs.
func TestRegistry_MergeStates_BoundedPerTableAndOffWithLeanStatesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, a := evictedMergeTable(t, tables.Silver)
	ts := r.states[a]
	r.takeState(a)
	r.stateBudget = stateBytes(&ts)*maxStateShare - 1
	r.putState(a, ts)
	require.Zero(t, r.counts().States, "over its share")
	r.stateBudget = defaultStateBytes
	r.leanStatesOnly = true
	r.putState(a, ts)
	require.Zero(t, r.counts().States, "lean states only")
	_, err := r.writer(ctx, a, createMissing)
	require.NoError(t, err)
	require.Zero(t, r.counts().StateOpens)
}

// TestRegistry_StateBudget_DropsStatesBeyondIt: the compact states stay
// within their byte budget.
func TestRegistry_StateBudget_DropsStatesBeyondIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r := newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1})
	var one int64
	for i := 0; i < 12; i++ {
		w, err := r.writer(ctx, tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, createMissing)
		require.NoError(t, err)
		_, err = commitOne(ctx, w, 1)
		require.NoError(t, err)
		r.resized(tables.TableKey{}, w)
		if c := r.counts(); c.States == 1 && one == 0 {
			one = c.StateBytes
			r.stateBudget = 5 * one
		}
	}
	c := r.counts()
	require.Positive(t, one)
	require.Equal(t, 5, c.States)
	require.LessOrEqual(t, c.StateBytes, r.stateBudget)
}

// TestRegistry_StateBudget_DropsMergeTablesStatesFirst: beyond the
// budget a MERGE table's state (a few KB) goes before a lean table's (a
// few hundred bytes): each saves one log read.
func TestRegistry_StateBudget_DropsMergeTablesStatesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, r, silver := evictedMergeTable(t, tables.Silver)
	full := r.states[silver]
	lean := leanStateForTest(t)
	r.takeState(silver)
	require.Zero(t, r.counts().States)
	r.stateBudget = stateBytes(&full) * maxStateShare
	r.putState(silver, full)
	for i := 0; r.counts().StateBytes+stateBytes(&lean) <= r.stateBudget; i++ {
		r.putState(tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, lean)
	}
	r.putState(tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, lean)
	_, ok := r.states[silver]
	require.False(t, ok, "the MERGE table's state went first")
	c := r.counts()
	require.LessOrEqual(t, c.StateBytes, r.stateBudget)
	require.Empty(t, r.fullKeys)
	_, err := r.writer(ctx, silver, createMissing)
	require.NoError(t, err)
}

// TestRegistry_MergeStates_StayWithinTheirShareOfTheBudget: the MERGE
// tables' states, which keep their files' actions alive, hold at most
// fullStateShare of the states' budget however many MERGE tables are
// evicted, and never displace a lean table's state: they fill what the
// lean ones leave, up to their share.
func TestRegistry_MergeStates_StayWithinTheirShareOfTheBudget(t *testing.T) {
	t.Parallel()
	_, r, silver := evictedMergeTable(t, tables.Silver)
	full, ok := r.takeState(silver)
	require.True(t, ok)
	require.True(t, full.Full())
	r.stateBudget = stateBytes(&full) * maxStateShare
	lean := leanStateForTest(t)
	var leanKeys []tables.TableKey
	for r.counts().StateBytes+stateBytes(&lean) <= r.stateBudget/2 {
		k := tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
		r.putState(k, lean)
		leanKeys = append(leanKeys, k)
	}
	for i := 0; i < 4*maxStateShare; i++ {
		r.putState(tables.TableKey{Tenant: uuid.New(), Kind: tables.Silver}, full)
		c := r.counts()
		require.LessOrEqual(t, c.FullStateBytes, r.stateBudget/fullStateShare, "after %d MERGE tables' states", i+1)
		require.LessOrEqual(t, c.StateBytes, r.stateBudget)
	}
	c := r.counts()
	leanBytes := int64(len(leanKeys)) * stateBytes(&lean)
	want := min(r.stateBudget/fullStateShare, r.stateBudget-leanBytes) / stateBytes(&full)
	require.Equal(t, want, int64(c.FullStates), "as many as their share and the lean states leave hold")
	require.Equal(t, c.FullStates, len(r.fullKeys))
	for _, k := range leanKeys {
		_, ok := r.states[k]
		require.True(t, ok, "a lean table's state was dropped for a MERGE table's")
	}
}

// leanStateForTest is a bronze table's compact state, taken from an
// evicted writer.
func leanStateForTest(t *testing.T) delta.TableState {
	ctx := context.Background()
	r := newRegistry(store.NewMem(), registryOptions{Lean: true, MaxOpen: 1})
	bronze := tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
	w, err := r.writer(ctx, bronze, createMissing)
	require.NoError(t, err)
	_, err = commitOne(ctx, w, 1)
	require.NoError(t, err)
	r.resized(bronze, w)
	_, err = r.writer(ctx, tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, createMissing) // evicts bronze
	require.NoError(t, err)
	ts, ok := r.takeState(bronze)
	require.True(t, ok)
	require.False(t, ts.Full())
	return ts
}

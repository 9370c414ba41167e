package lakewriter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrainOnce_StartReadsEachTableLogOnce: a start with nothing to drain
// — fork check (bronze heads), finding the newest batch, the continuity
// check and the catch-up — lists each table's log once, even with room
// for a single open writer (before: every one of them opened every table
// again, and with more tables than --max-open-tables each pass re-read
// the logs). Nothing is skipped for it: the drain is still exact.
func TestDrainOnce_StartReadsEachTableLogOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.load(t, workload.Config{Claims: 6, Seed: 7})
	lake := store.NewMem()
	o := b.opts(lake)
	o.CheckpointInterval = 3 // some tables stand on a checkpoint (their txn has no commitInfo in the snapshot)
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)

	o.MaxOpenTables = 1
	again, err := lakewriter.New(o)
	require.NoError(t, err)
	before := len(lake.Trace())
	sum, err := again.DrainOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, sum.Rows)
	require.Empty(t, sum.Refused)

	lists := map[string]int{}
	for _, e := range lake.Trace()[before:] {
		if e.Op == store.OpList && strings.HasSuffix(e.Key, delta.LogDir) {
			lists[strings.TrimSuffix(e.Key, "/"+delta.LogDir)]++
		}
	}
	require.NotEmpty(t, lists)
	for table, n := range lists {
		if n != 1 {
			for _, e := range lake.Trace()[before:] {
				if strings.HasPrefix(e.Key, table) {
					t.Log(e)
				}
			}
		}
		require.Equal(t, 1, n, "the log of %s was listed %d times at start", table, n)
	}
	b.verifyLake(t, lake)
}

// TestHeadOf_LeanBronzeOnACheckpoint_MatchesReadHead: the fork check at
// start reads bronze's newest event from the lake writer's lean snapshot
// (whose base checkpoint's files are not in memory); it must be the event
// a full read finds.
func TestHeadOf_LeanBronzeOnACheckpoint_MatchesReadHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	// Enough rows for at least three bronze commits per tenant in 50-row
	// batches (a table's first commit is its version 0): a checkpoint at
	// version 1 with commits after it.
	b.load(t, workload.Config{Claims: 20, Seed: 3})
	lake := store.NewMem()
	o := b.opts(lake)
	o.CheckpointInterval = 2
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)
	for _, tn := range b.tenants {
		st, err := bronze.Key(tn).Store(lake)
		require.NoError(t, err)
		w, err := delta.OpenWriter(ctx, st, delta.Options{Lean: true})
		require.NoError(t, err)
		snap := w.Snapshot()
		require.GreaterOrEqual(t, snap.CheckpointVersion(), int64(0), "bronze of %s stands on a checkpoint", tn)
		want, ok, err := bronze.ReadHead(ctx, lake, tn)
		require.NoError(t, err)
		require.True(t, ok)
		got, ok, err := bronze.HeadOf(ctx, snap, st, tn)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, got)
	}
}

// TestDrainOnce_FreshLake_StartListsEachEmptyTenantOnceAndNoTableLog: on a
// store that can tell in one request whether a tenant has anything
// (store.AnyUnder: S3, the in-memory store), a tenant with nothing in the
// lake costs the start-up scan one listing, not a read of each of its
// tables' logs; its tables are created by their first commits without
// being read again, and a second pass over the same lake still reads each
// table that now exists (TestDrainOnce_StartReadsEachTableLogOnce).
func TestDrainOnce_FreshLake_StartListsEachEmptyTenantOnceAndNoTableLog(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.load(t, workload.Config{Claims: 6, Seed: 11})
	lake := store.NewMem()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	b.drainAll(t, d)

	tenantLists := map[string]int{}
	for _, e := range lake.Trace() {
		switch {
		case e.Op == store.OpList && strings.HasSuffix(e.Key, delta.LogDir),
			e.Op == store.OpGet && strings.HasSuffix(e.Key, delta.LastCheckpointKey):
			t.Errorf("a table of a tenant with nothing in the lake was read: %s", e)
		case e.Op == store.OpList && strings.Count(e.Key, "/") == 1 && !strings.HasPrefix(e.Key, "_"):
			tenantLists[e.Key]++
		}
	}
	require.NotEmpty(t, tenantLists)
	for prefix, n := range tenantLists {
		require.Equal(t, 1, n, "tenant %s was listed %d times", prefix, n)
	}
	b.verifyLake(t, lake)
}

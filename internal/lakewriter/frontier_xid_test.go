package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/workload"
)

// TestFrontier_RecordsTheHorizonXidItWaitedOn: after a pass, the frontier
// cache's horizon_xid is the fence the snapshot horizon passed: later than
// the xid of every outbox row the pass applied (so each of them was final),
// and it moves forward with the next pass.
func TestFrontier_RecordsTheHorizonXidItWaitedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	readXid := func() (xid *uint64, maxRow uint64) {
		var x *int64
		var m int64
		require.NoError(t, b.pool.QueryRow(ctx, `
SELECT (SELECT horizon_xid::text::bigint FROM oml.lake_frontier),
       (SELECT coalesce(max(xid::text::bigint), 0) FROM oml.outbox)`).Scan(&x, &m))
		if x == nil {
			return nil, uint64(m)
		}
		u := uint64(*x)
		return &u, uint64(m)
	}
	d, err := lakewriter.New(b.opts(store.NewMem()))
	require.NoError(t, err)

	b.load(t, workload.Config{Claims: 5, Seed: 61})
	b.drainAll(t, d)
	first, maxRow := readXid()
	require.NotNil(t, first, "horizon_xid is recorded, not left NULL")
	require.Greater(t, *first, maxRow, "the fence waited on is later than every applied row's xid")

	b.load(t, workload.Config{Claims: 5, Seed: 62})
	b.drainAll(t, d)
	second, maxRow := readXid()
	require.NotNil(t, second)
	require.Greater(t, *second, maxRow)
	require.Greater(t, *second, *first, "the next pass records its own, later fence")
}

// TestFrontier_LongRunningWriterRecordsTheHorizonXid: the same for the
// long-running writer (oml lake drain under systemd), whose loop takes its
// fences on its own.
func TestFrontier_LongRunningWriterRecordsTheHorizonXid(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 5, Seed: 63})
	last := b.lastSeq(t)
	d, err := lakewriter.New(b.opts(store.NewMem()))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for d.Frontier() < last {
		require.True(t, time.Now().Before(deadline), "the writer never reached seq %d (frontier %d)", last, d.Frontier())
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
	cancel()
	require.NoError(t, <-done)
	var x *int64
	var maxRow int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `
SELECT (SELECT horizon_xid::text::bigint FROM oml.lake_frontier),
       (SELECT coalesce(max(xid::text::bigint), 0) FROM oml.outbox)`).Scan(&x, &maxRow))
	require.NotNil(t, x, "horizon_xid is recorded, not left NULL")
	require.Greater(t, *x, maxRow)
}

// TestFrontier_DeletedCacheRow_WriterRecreatesItFromTheLake: the frontier
// cache row deleted by hand is not an outage to wait out for ever. Readers
// other than the lake writer stop with outbox.ErrFrontierMissing (prune
// must not act on a frontier of 0); the lake writer's next start resumes
// from the lake (the authority), drains what is new exactly once and
// recreates the row at the right frontier. Both with a lake that already
// holds commits and with an empty one.
func TestFrontier_DeletedCacheRow_WriterRecreatesItFromTheLake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"LakeHoldsCommits", "EmptyLake"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 2)
			lake := store.NewMem()
			b.load(t, workload.Config{Claims: 6, Seed: 71})
			if name == "LakeHoldsCommits" {
				b.drainInto(t, lake)
				b.load(t, workload.Config{Claims: 6, Seed: 72})
			}
			_, err := b.pool.Exec(ctx, `DELETE FROM oml.lake_frontier`)
			require.NoError(t, err)
			_, err = outbox.ReadFrontier(ctx, b.pool)
			require.ErrorIs(t, err, outbox.ErrFrontierMissing, "a reader other than the writer stops with the named error")

			b.drainInto(t, lake)
			f, err := outbox.ReadFrontier(ctx, b.pool)
			require.NoError(t, err, "the writer recreated the cache row")
			require.Equal(t, b.lastSeq(t), f.Seq, "the recreated cache says what the lake holds")
			b.verifyLake(t, lake)
		})
	}
}

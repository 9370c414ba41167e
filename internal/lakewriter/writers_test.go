package lakewriter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestTwoWriters_NoLease_DeltaFenceKeepsExactlyOnce runs two writers at once
// with the lease turned off (as after a lease lost to a partition), cutting
// batches with different bounds, against one lake and one outbox. The Delta
// put-if-absent and the per-table txn version are the only fences left: no
// row may be duplicated or lost.
func TestTwoWriters_NoLease_DeltaFenceKeepsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 40, Seed: 7, RetractRatio: 0.5})
	lake := store.NewMem()

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, rows := range []int{7, 13} {
		o := b.opts(lake)
		o.Limits = lakewriterLimits(rows)
		o.Holder = []string{"writer-a", "writer-b"}[i]
		d, err := lakewriter.New(o)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50 && d.Frontier() < b.lastSeq(t); j++ {
				if _, err := d.DrainOnce(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// More load while both drain.
	b.load(t, workload.Config{Claims: 20, Seed: 8, RetractRatio: 0.5})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b.drainInto(t, lake)
	b.verifyLake(t, lake)
}

// TestTwoWriters_Lease_SecondIsNotLeader starts two writers with the lease
// on: the second reports who holds the lease and writes nothing.
func TestTwoWriters_Lease_SecondIsNotLeader(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 5, Seed: 3})
	lake := store.NewMem()

	o1 := b.opts(lake)
	o1.NoLease, o1.Holder, o1.LeaseTTL = false, "first", time.Minute
	first, err := lakewriter.New(o1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	require.Eventually(t, func() bool {
		le, err := lakewriter.ReadLease(context.Background(), b.pool)
		return err == nil && le != nil && le.Holder == "first"
	}, 10*time.Second, 5*time.Millisecond)

	o2 := b.opts(lake)
	o2.NoLease, o2.Holder = false, "second"
	second, err := lakewriter.New(o2)
	require.NoError(t, err)
	_, err = second.DrainOnce(context.Background())
	var nl *lakewriter.NotLeaderError
	require.True(t, errors.As(err, &nl), "got %v", err)
	require.Equal(t, "first", nl.Holder.Holder)
	require.Contains(t, err.Error(), "another lake writer holds the lease")

	// The leader drains everything; stopping it releases the lease.
	require.Eventually(t, func() bool { return first.Frontier() >= b.lastSeq(t) }, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	le, err := lakewriter.ReadLease(context.Background(), b.pool)
	require.NoError(t, err)
	require.Nil(t, le, "a clean stop releases the lease")
	b.verifyLake(t, lake)
}

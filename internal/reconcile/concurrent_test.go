package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/workload"
)

// TestReconcile_WhileTheWorkloadAndTheLakeWriterRun: reconcile reads the
// frontier, then the Delta snapshots, then a PostgreSQL snapshot, which is
// what makes it safe against a drain and appends running at the same time.
// Here a workload keeps appending (promotions and retracts) and the lake
// writer keeps draining in small batches while reconcile runs again and
// again: every run is clean, and at least one compared rows that arrived
// during the test.
func TestReconcile_WhileTheWorkloadAndTheLakeWriterRun(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 71})
	require.Empty(t, b.drain(t))
	before := b.reconcile(t, reconcile.Options{})
	requireClean(t, before)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := b.drainOpts()
	o.Poll, o.MaxWait, o.Limits = time.Millisecond, time.Millisecond, outbox.Limits{Rows: 7}
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	drained := make(chan error, 1)
	go func() { drained <- d.Run(ctx) }()
	loaded := make(chan error, 1)
	go func() {
		_, err := workload.Run(ctx, b.Pool, b.Key, workload.Config{Tenants: b.Tenants, Claims: 3, PromoteRatio: 0.8, RetractRatio: 0.5,
			Seed: 72, Duration: time.Hour, Concurrency: 2})
		loaded <- err
	}()

	var last *reconcile.Report
	for i := 0; i < 8; i++ {
		last = b.reconcile(t, reconcile.Options{})
		requireClean(t, last)
	}
	cancel()
	require.NoError(t, <-loaded)
	if err := <-drained; err != nil && !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	require.Greater(t, last.Stats.Claims, before.Stats.Claims, "the runs saw claims appended during the test")

	// And once everything is drained, the final state is clean too.
	require.Empty(t, b.drain(t))
	requireClean(t, b.reconcile(t, reconcile.Options{}))
}

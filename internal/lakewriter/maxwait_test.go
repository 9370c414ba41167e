package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestRun_PendingRowsOlderThanMaxWait_AreCutAtOnce: rows that have already
// waited longer than --max-wait when the loop first sees them (written
// while a batch committed, or before the writer started) are cut at once,
// not after --max-wait more counted from when the loop saw them. Here
// --max-wait is ten minutes and the rows are twenty minutes old: the batch
// is cut as soon as the loop runs.
func TestRun_PendingRowsOlderThanMaxWait_AreCutAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 2, Seed: 121}) // a few rows: one batch, not full
	_, err := b.pool.Exec(ctx, `UPDATE oml.outbox SET created_at = created_at - interval '20 minutes'`)
	require.NoError(t, err)
	o := b.opts(store.NewMem())
	o.MaxWait = 10 * time.Minute
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	want := b.lastSeq(t)
	require.Eventually(t, func() bool { return d.Frontier() >= want }, 2*time.Minute, 10*time.Millisecond,
		"rows twenty minutes old are cut without waiting --max-wait (ten minutes) again")
}

package lakewriter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrain_S3SizedParallelism_CrashMidBatchFrontierStaysRestartExact: with
// as many tables committing at once as on S3 (store.S3Concurrency), a
// crash after some tables of a batch committed — while others are still
// committing — leaves the frontier cache at the previous batch (it moves
// only after every table of the batch landed), and a restart finishes the
// batch exactly once; every table's rows are applied by one goroutine in
// seq order (verifyLake checks each table's content).
func TestDrain_S3SizedParallelism_CrashMidBatchFrontierStaysRestartExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 12)
	b.load(t, workload.Config{Claims: 6, Seed: 11, RetractRatio: 0.5})
	lake := store.NewMem()
	o := b.opts(lake)
	o.Parallel = store.S3Concurrency
	o.Limits = lakewriterLimits(1000) // one batch touches every table
	// The first table to finish its data files waits until a second one
	// has too: with tables committed one at a time that never happens.
	var mu sync.Mutex
	committed, inFlight := 0, 0
	two := make(chan struct{})
	var waited bool
	hook := func(p lakewriter.CrashPoint, _ tables.TableKey) error {
		mu.Lock()
		switch p {
		case lakewriter.AfterDataFiles:
			inFlight++
			if inFlight == 2 {
				close(two)
			}
			if !waited {
				waited = true
				mu.Unlock()
				select {
				case <-two:
					return nil
				case <-time.After(time.Minute):
					return errors.New("no second table was committing at the same time")
				}
			}
		case lakewriter.AfterTableCommit:
			committed++
			if committed == 5 {
				mu.Unlock()
				return errors.New("injected crash")
			}
		}
		mu.Unlock()
		return nil
	}
	o.Crash = hook
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(ctx)
	require.ErrorIs(t, err, lakewriter.ErrCrashed)
	var frontier int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT frontier FROM oml.lake_frontier`).Scan(&frontier))
	require.Zero(t, frontier, "the frontier cache moved past a batch not every table committed")
	require.ErrorContains(t, err, "injected crash")

	o.Crash = nil
	again, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, again)
	b.verifyLake(t, lake)
}

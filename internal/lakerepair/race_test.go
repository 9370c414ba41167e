package lakerepair_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// TestRepair_WhileDrainsRunAndTheApplicationWrites_NoRowLostOrDuplicated:
// planted row problems are repaired while the application keeps writing
// and `oml lake drain --once` runs again and again (each a fresh writer
// taking the lease, as cron runs it). The repair waits for the lease and
// drains wait for the repair; afterwards one more drain makes the lake
// equal the journal exactly: no row lost, none duplicated.
func TestRepair_WhileDrainsRunAndTheApplicationWrites_NoRowLostOrDuplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	e, t0, t1 := newRowsEnv(t, lake)
	plantRowProblems(t, e, t0, t1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var drains, refused int
	var bgErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := workload.Run(ctx, e.pool, e.key, workload.Config{Tenants: []uuid.UUID{t0, t1}, Claims: 2, Seed: 100 + i, PromoteRatio: 0.7, RetractRatio: 0.3}); err != nil {
				bgErr = err
				return
			}
			o := e.drainOpts()
			o.NoLease, o.LeaseTTL, o.Holder = false, 2*time.Second, "test-drain"
			d, err := lakewriter.New(o)
			if err != nil {
				bgErr = err
				return
			}
			_, err = d.DrainOnce(ctx)
			var nl *lakewriter.NotLeaderError
			switch {
			case errors.As(err, &nl):
				refused++
			case err != nil:
				bgErr = err
				return
			default:
				drains++
			}
		}
	}()
	res, err := e.repair(t, lakerepair.Options{LeaseTTL: 2 * time.Second, LeaseWait: time.Minute, NoLease: false})
	close(stop)
	wg.Wait()
	require.NoError(t, bgErr)
	require.NoError(t, err)
	require.NotEmpty(t, res.Repaired)
	// Drains ran beside the repair: each either drained (before or after
	// it) or was refused the lease while the repair held it.
	require.Positive(t, drains+refused, "drains ran beside the repair")
	t.Logf("drains %d, refused while the repair held the lease %d", drains, refused)

	e.drain(t)
	requireLakeEqualsJournal(t, e)
	e.requireNoTableToRepair(t)
}

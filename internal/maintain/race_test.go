package maintain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/workload"
)

// Compaction and erase-bodies rewrites run in a loop while a workload
// appends (promotions, demotions, erasures...) and a live lake writer
// drains it in small batches, so its appends and MERGEs keep landing
// between a rewrite's read and its commit. Afterwards the lake must equal
// the journal fold exactly once, and no table's log may ever remove a
// file that is not live or re-add one.
func TestCompact_RacingLiveDrain_LakeEqualsFoldExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("file lake", func(t *testing.T) {
		t.Parallel()
		raceLiveDrain(t, setup(t, 2), 8)
	})
	t.Run("S3 lake", func(t *testing.T) {
		t.Parallel()
		raceLiveDrain(t, setupOn(t, 2, s3test.NewBucket(t, nil).Store), 4)
	})
}

func raceLiveDrain(t *testing.T, b *bundle, rounds int) {
	t.Helper()
	if testing.Short() {
		rounds = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := b.drainer(t, 15)
	drained := make(chan error, 1)
	go func() { drained <- d.Run(ctx) }()
	loaded := make(chan error, 1)
	go func() {
		for r := 0; r < rounds; r++ {
			_, err := workload.Run(ctx, b.Pool, b.Key, workload.Config{
				Tenants: b.Tenants, Claims: 12, PromoteRatio: 0.8, RetractRatio: 0.5,
				Seed: uint64(r + 1), Concurrency: 2,
			})
			if err != nil {
				loaded <- err
				return
			}
		}
		loaded <- nil
	}()

	var commits, restarts, erased, passes int
	compactAll := func() {
		for _, tab := range b.tables(t) {
			er, err := maintain.EraseBodies(ctx, tab, maintain.EraseOptions{})
			if !errors.Is(err, maintain.ErrGaveUp) {
				require.NoError(t, err)
			}
			restarts += er.Restarts
			if er.Version >= 0 {
				commits++
				erased += er.BodiesNulled
			}
			cr, err := maintain.Compact(ctx, tab, maintain.CompactOptions{TargetSize: 1 << 20, MinFiles: 2})
			if errors.Is(err, maintain.ErrGaveUp) || isNotFound(err) {
				err = nil
			}
			require.NoError(t, err)
			restarts += cr.Restarts
			if cr.Version >= 0 {
				commits++
			}
		}
		passes++
	}
	for loading := true; loading; {
		select {
		case err := <-loaded:
			require.NoError(t, err)
			loading = false
		default:
			compactAll()
		}
	}
	cancel()
	if err := <-drained; err != nil && !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	ctx = context.Background()
	b.drainAll(t, b.drainer(t, 15))
	compactAll()
	t.Logf("%d passes over every table: %d maintenance commits, %d restarts after a concurrent MERGE, %d bodies erased", passes, commits, restarts, erased)
	require.Positive(t, commits, "no compaction was ever committed: the test proved nothing")

	b.verifyLake(t)
	for _, tab := range b.tables(t) {
		if _, err := tab.Store.Stat(ctx, "_delta_log/00000000000000000000.json"); err != nil {
			continue
		}
		requireLogSound(t, tab.Key.Path(), readLog(t, tab.Store))
	}
}

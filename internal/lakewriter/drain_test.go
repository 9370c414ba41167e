package lakewriter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

func TestDrain_WorkloadLandsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 40, Seed: 1})
	lake := store.NewMem()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Greater(t, sum.Batches, 1, "small batch limits must cut several batches")
	require.Empty(t, sum.DeadLettered)
	b.verifyLake(t, lake)

	// Draining again is a no-op.
	sum2, err := d.DrainOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, sum2.Batches)
	b.verifyLake(t, lake)
}

// TestDrain_MaxOpenTablesOne_EvictsAndReopensTablesExactlyOnce bounds the
// open table writers to one: every table a batch touches evicts the one
// before it and is reopened from its log next time, and the lake is still
// exact, batch after batch.
func TestDrain_MaxOpenTablesOne_EvictsAndReopensTablesExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.load(t, workload.Config{Claims: 30, Seed: 7})
	lake := store.NewMem()
	o := b.opts(lake)
	o.MaxOpenTables = 1
	o.CheckpointInterval = 3 // reopen across checkpoints too
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Greater(t, sum.Batches, 3)
	open, evictions := d.OpenTables()
	require.LessOrEqual(t, open, 1)
	require.Greater(t, evictions, int64(sum.Batches), "tables were evicted and reopened")
	b.verifyLake(t, lake)

	// More rows for the same tables, through writers reopened from the log.
	b.load(t, workload.Config{Claims: 10, Seed: 8})
	b.drainAll(t, d)
	b.verifyLake(t, lake)
}

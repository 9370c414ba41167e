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

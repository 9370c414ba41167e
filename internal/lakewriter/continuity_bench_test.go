package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// BenchmarkContinuityCheck measures what the continuity check adds to
// every batch: one round trip that reads the database's identity, counts
// the batch's outbox rows, reads its last row (the anchor the commits
// record) and re-reads the previous batch's anchor. Batches are the
// default size, 10,000 rows. For scale, it also reports the mean time of
// a whole batch of the same size drained into a file lake (ns/batch).
func BenchmarkContinuityCheck(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, 20)
	_, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 400, Seed: 7,
		PromoteRatio: 0.7, RetractRatio: 0.2, Batch: 20, Concurrency: 8})
	require.NoError(b, err)
	last := d.LastSeq(b)
	const batch = 10000
	require.Greater(b, last, int64(2*batch), "the workload must fill two batches")
	lake, err := store.Open(ctx, "file://"+b.TempDir())
	require.NoError(b, err)
	o := d.DrainOptions(lake)
	o.Limits.Rows = batch
	o.StopAt = batch
	w, err := lakewriter.New(o)
	require.NoError(b, err)
	started := time.Now()
	sum, err := w.DrainOnce(ctx) // the first batch, so there is a previous anchor
	require.NoError(b, err)
	perBatch := float64(time.Since(started).Nanoseconds()) / float64(max(sum.Batches, 1))
	require.NoError(b, w.BeforeBatch(ctx, 0, batch))

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.BeforeBatch(ctx, batch, 2*batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perBatch, "ns/batch")
}

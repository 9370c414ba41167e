package lakewriter_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

var benchLoadTenants = flag.Int("bench.loadtenants", 1600, "tenants BenchmarkLoadBatch's batch spans (the 10,000-tenant lag run's batches touch ~1,600 tenants' tables)")

// BenchmarkLoadBatch measures a steady-state batch read: the outbox scan,
// the decoding of every row for its table and the row check (loadBatch),
// over one batch shaped like the 10,000-tenant lag run's (~8,000 rows of
// ~1,600 tenants: each tenant's claim submitted and promoted, a tenth of them
// retracted: bronze, silver, gold.lineage and gold.workareas rows). The
// row checker is warm (its tenants verified), as in a long-running
// writer. fastjson=false decodes every payload with encoding/json, as
// before the fast path (flatjson.go). cpu-ms/op is this process's CPU per batch (PostgreSQL's is not
// in it), the figure to compare on a shared machine.
func BenchmarkLoadBatch(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, *benchLoadTenants)
	_, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 1, Seed: 97,
		PromoteRatio: 0.99, RetractRatio: 0.1, Batch: 1, Concurrency: 8})
	require.NoError(b, err)
	var last int64
	require.NoError(b, d.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM oml.outbox`).Scan(&last))
	load := lakewriter.BatchLoader(d.Pool)
	rows, poison, err := load(ctx, 0, last) // warms the checker's tenants
	require.NoError(b, err)
	require.Zero(b, poison)
	for _, fast := range []bool{false, true} {
		b.Run(fmt.Sprintf("fastjson=%v", fast), func(b *testing.B) {
			defer lakewriter.SetFastJSON(lakewriter.SetFastJSON(fast))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, _, err := load(ctx, 0, last); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(rows), "rows/op")
		})
	}
}

package workload_test

import (
	"context"
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

var (
	benchTenants = flag.Int("bench.tenants", 1000, "tenants BenchmarkRun writes to")
	benchConc    = flag.Int("bench.concurrency", 8, "BenchmarkRun's Concurrency")
	benchFor     = flag.Duration("bench.for", 10*time.Second, "how long BenchmarkRun writes")
	benchRate    = flag.Float64("bench.rate", 0, "events/s BenchmarkRun asks for (0: as fast as it goes)")
)

// BenchmarkRun writes the lag benchmark's load (5 claims a round, 70%
// promoted, 20% of those retracted) as fast as it goes for -bench.for and
// reports events/s (BenchmarkFrontierLag's load without the lake writer) and this process's CPU per event: the generator's own
// cost, PostgreSQL's is in its own processes.
func BenchmarkRun(b *testing.B) {
	d := testkit.NewDeployment(b, *benchTenants)
	// The application's own pool, one connection per writer (the default
	// pool's 4 would queue the writers, not load PostgreSQL).
	pool := d.DB.PoolSized(b, int32(*benchConc))
	for i := 0; i < b.N; i++ {
		var before, after syscall.Rusage
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &before))
		res, err := workload.Run(context.Background(), pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 5, Seed: uint64(5 + i),
			FirstRound: i * 1000, PromoteRatio: 0.7, RetractRatio: 0.2, Duration: *benchFor, Rate: *benchRate, Concurrency: *benchConc})
		require.NoError(b, err)
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &after))
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		el := time.Duration(res.Stats.ElapsedNano)
		b.ReportMetric(float64(res.Stats.Events)/el.Seconds(), "events/s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(res.Stats.Events), "cpu_us/event")
		b.ReportMetric(float64(res.Stats.Events)/float64(res.Stats.Appends), "events/append")
	}
}

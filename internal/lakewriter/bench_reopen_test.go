package lakewriter

import (
	"context"
	"flag"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

var (
	benchReopenTenants = flag.Int("bench.reopentenants", 2000, "tenants in BenchmarkReopenSteadyState")
	benchReopenMaxOpen = flag.Int("bench.reopenmaxopen", DefaultMaxOpenTables, "--max-open-tables in BenchmarkReopenSteadyState")
)

// BenchmarkReopenSteadyState is the lake writer's steady state with more
// tables than --max-open-tables (docs/lake-writer.md, memory): a file
// lake of N tenants' four tables, each created and committed once
// through the registry as a drain does (untimed); then each round commits
// one more row to every table, --parallel 4 at a time, as a batch that
// touches every tenant does — so nearly every commit reopens its table
// (4N tables against --max-open-tables, -bench.reopenmaxopen). states=on rebuilds the evicted
// lean tables (bronze, gold) from their compact states; states=off reads
// every table's log, as before. It reports the time and allocations per
// table commit (wall and CPU), the tables reopened from their logs and from their
// states per round, and the compact states' bytes per table.
//
//	go test -run '^$' -bench BenchmarkReopenSteadyState -benchtime 3x ./internal/lakewriter/ -args -bench.reopentenants 10000
func BenchmarkReopenSteadyState(b *testing.B) {
	for _, states := range []bool{true, false} {
		name := "states=on"
		if !states {
			name = "states=off"
		}
		b.Run(name, func(b *testing.B) { benchReopen(b, *benchReopenTenants, states) })
	}
}

// processCPU is the process's user and system CPU time so far: on a
// shared machine it says more than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchReopen(b *testing.B, n int, states bool) {
	ctx := context.Background()
	lake, err := store.NewFile(b.TempDir(), store.WithSync(store.SyncAuto))
	require.NoError(b, err)
	keys := make([]tables.TableKey, 0, n*tables.NumKinds)
	for range n {
		t := uuid.New()
		for _, k := range tables.Kinds {
			keys = append(keys, tables.TableKey{Tenant: t, Kind: k})
		}
	}
	d := &Drainer{opts: Options{WitnessInterval: time.Second}}
	d.tables = newRegistry(lake, registryOptions{Lean: true, MaxOpen: *benchReopenMaxOpen})
	d.tables.setBudget(DefaultMemory / OpenTablesShare)
	d.tables.noStates = !states
	round := func(r int) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4) // a file lake's --parallel (store.Concurrency)
		for j, key := range keys {
			g.Go(func() error { return commitLikeTheDrain(gctx, d, key, int64(r*1_000_000+j+1)) })
		}
		require.NoError(b, g.Wait())
	}
	for _, key := range keys {
		d.tables.markAbsent(key) // as the start-up scan of an empty lake leaves it
	}
	round(0)
	before := d.tables.counts()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(i + 1)
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	runtime.ReadMemStats(&ms1)
	after := d.tables.counts()
	commits := float64(b.N * len(keys))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/commits, "ns/commit")
	b.ReportMetric(float64(cpu.Nanoseconds())/commits, "cpu-ns/commit")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/commits, "allocs/commit")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/commits, "B/commit")
	b.ReportMetric(float64(after.LogOpens-before.LogOpens)/float64(b.N), "log-opens/round")
	b.ReportMetric(float64(after.StateOpens-before.StateOpens)/float64(b.N), "state-opens/round")
	if after.States > 0 {
		b.ReportMetric(float64(after.StateBytes)/float64(after.States), "state-B/table")
	}
	b.ReportMetric(float64(liveHeap())/float64(len(keys)), "live-heap-B/table")
	runtime.KeepAlive(d)
}

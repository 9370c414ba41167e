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
// one more row to every table, --parallel 4 at a time, one kind after the
// other (so each kind's CPU and allocations are measured apart) — so
// nearly every commit reopens its table (4N tables against
// --max-open-tables, -bench.reopenmaxopen). states=all rebuilds every
// evicted table from its compact state (silver's and gold/workareas' with
// their live files); states=lean only bronze and gold, reading silver's
// and gold/workareas' logs (as before MERGE tables had states);
// states=off reads every table's log. It reports, per table commit, the
// wall and CPU time and allocations in all and per kind (silver.claims-cpu-ns,
// gold.workareas-allocs, ...), the tables reopened from their logs and from
// their states per round, and the compact states' bytes per table (in
// all and per kind).
//
//	go test -run '^$' -bench BenchmarkReopenSteadyState -benchtime 3x ./internal/lakewriter/ -args -bench.reopentenants 10000
func BenchmarkReopenSteadyState(b *testing.B) {
	for _, states := range []string{"all", "lean", "off"} {
		b.Run("states="+states, func(b *testing.B) { benchReopen(b, *benchReopenTenants, states) })
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

func benchReopen(b *testing.B, n int, states string) {
	ctx := context.Background()
	lake, err := store.NewFile(b.TempDir(), store.WithSync(store.SyncAuto))
	require.NoError(b, err)
	keys := make([][]tables.TableKey, tables.NumKinds) // by kind
	for range n {
		t := uuid.New()
		for i, k := range tables.Kinds {
			keys[i] = append(keys[i], tables.TableKey{Tenant: t, Kind: k})
		}
	}
	d := &Drainer{opts: Options{WitnessInterval: time.Second}}
	d.tables = newRegistry(lake, registryOptions{Lean: true, MaxOpen: *benchReopenMaxOpen})
	d.tables.setBudget(DefaultMemory / OpenTablesShare)
	d.tables.noStates = states == "off"
	d.tables.leanStatesOnly = states == "lean"
	type spent struct {
		cpu            time.Duration
		mallocs, bytes uint64
	}
	perKind := make([]spent, tables.NumKinds)
	// The states of a kind's tables, counted before its last phase (when
	// its tables are all evicted).
	stateBytesOf := make([]int64, tables.NumKinds)
	statesOf := make([]int, tables.NumKinds)
	countStates := func(kind tables.Kind, i int) {
		d.tables.mu.Lock()
		defer d.tables.mu.Unlock()
		for k, ts := range d.tables.states {
			if k.Kind == kind {
				stateBytesOf[i] += stateBytes(&ts)
				statesOf[i]++
			}
		}
	}
	var ms0, ms1 runtime.MemStats
	round := func(r int, measure bool) {
		for i, kk := range keys {
			if measure && r == b.N {
				countStates(tables.Kinds[i], i)
			}
			if measure {
				runtime.ReadMemStats(&ms0)
			}
			cpu0 := processCPU()
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(4) // a file lake's --parallel (store.Concurrency)
			for j, key := range kk {
				g.Go(func() error { return commitLikeTheDrain(gctx, d, key, int64(r*1_000_000+i*n+j+1)) })
			}
			require.NoError(b, g.Wait())
			if measure {
				perKind[i].cpu += processCPU() - cpu0
				runtime.ReadMemStats(&ms1)
				perKind[i].mallocs += ms1.Mallocs - ms0.Mallocs
				perKind[i].bytes += ms1.TotalAlloc - ms0.TotalAlloc
			}
		}
	}
	for _, kk := range keys {
		for _, key := range kk {
			d.tables.markAbsent(key) // as the start-up scan of an empty lake leaves it
		}
	}
	round(0, false)
	before := d.tables.counts()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(i+1, true)
	}
	b.StopTimer()
	after := d.tables.counts()
	var all spent
	for i, k := range tables.Kinds {
		p := perKind[i]
		all.cpu, all.mallocs, all.bytes = all.cpu+p.cpu, all.mallocs+p.mallocs, all.bytes+p.bytes
		name := string(k) // silver.claims, gold.workareas, ...
		commits := float64(b.N * n)
		b.ReportMetric(float64(p.cpu.Nanoseconds())/commits, name+"-cpu-ns/commit")
		b.ReportMetric(float64(p.mallocs)/commits, name+"-allocs/commit")
		if statesOf[i] > 0 {
			b.ReportMetric(float64(stateBytesOf[i])/float64(statesOf[i]), name+"-state-B/table")
		}
		b.ReportMetric(float64(statesOf[i])/float64(n), name+"-states/table")
	}
	commits := float64(b.N * n * tables.NumKinds)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/commits, "ns/commit")
	b.ReportMetric(float64(all.cpu.Nanoseconds())/commits, "cpu-ns/commit")
	b.ReportMetric(float64(all.mallocs)/commits, "allocs/commit")
	b.ReportMetric(float64(all.bytes)/commits, "B/commit")
	b.ReportMetric(float64(after.LogOpens-before.LogOpens)/float64(b.N), "log-opens/round")
	b.ReportMetric(float64(after.StateOpens-before.StateOpens)/float64(b.N), "state-opens/round")
	if after.States > 0 {
		b.ReportMetric(float64(after.StateBytes)/float64(after.States), "state-B/table")
	}
	b.ReportMetric(float64(liveHeap())/float64(n*tables.NumKinds), "live-heap-B/table")
	runtime.KeepAlive(d)
}

package lakewriter

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// BenchmarkMergeSteadyState measures one steady-state MERGE table commit
// (build + Delta commit) of gold.workareas and of silver.claims on the
// memory store (the file store's fsyncs would drown the CPU in wait): the
// table holds benchMergeFiles data files of benchMergeRows rows (as the
// lake writer left them), and each op changes three rows already in it,
// in three files (a workareas commit: a change of three workareas; a
// silver commit: three retracts). cpu-us/op is the process's CPU per
// commit (user + system, getrusage); allocs/op and B/op are counts.
// path=cache-off is the MERGE without its rows cache (mergerows.go),
// which reads each file it rewrites twice, as before it; cache-on is the
// default.
func BenchmarkMergeSteadyState(b *testing.B) {
	for _, kind := range []tables.Kind{tables.Workareas, tables.Silver} {
		for _, path := range []string{"path=cache-off", "path=cache-on"} {
			b.Run(fmt.Sprintf("kind=%s/%s", kind, path), func(b *testing.B) {
				d := &Drainer{}
				if path == "path=cache-on" {
					d.mergeRows = newMergeRows(DefaultMemory / MergeRowsShare)
				}
				benchMerge(b, newMergeTable(b, kind, d, store.NewMem()))
			})
		}
	}
}

const (
	benchMergeFiles = 4
	benchMergeRows  = 6
)

// mergeCPU is the process's user+system CPU time so far.
func mergeCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchMerge(b *testing.B, m *mergeTable) {
	for f := 0; f < benchMergeFiles; f++ {
		var todo []*item
		for j := 0; j < benchMergeRows; j++ {
			todo = append(todo, m.insert(mergeName(f, j)))
		}
		m.commit(todo...)
	}
	require.Len(b, m.w.Snapshot().Files(), benchMergeFiles)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := mergeCPU(b)
	for i := 0; i < b.N; i++ {
		var todo []*item
		for f := 0; f < 3; f++ {
			todo = append(todo, m.change(mergeName((i+f)%benchMergeFiles, i%benchMergeRows), journal.StateDemoted))
		}
		m.commit(todo...)
	}
	b.StopTimer()
	b.ReportMetric(float64((mergeCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	require.Len(b, m.w.Snapshot().Files(), benchMergeFiles, "steady state: each commit rewrites the files it changes")
}

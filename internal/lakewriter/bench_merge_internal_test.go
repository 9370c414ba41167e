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
// default. For gold.workareas, path=by-file is the MERGE of session 24
// (with the cache), which rewrote each file it changed: the table stays
// at benchMergeFiles files; the default rewrites the small table whole,
// one file after the first commit (mergesWhole). files/op is the data
// files a commit writes.
func BenchmarkMergeSteadyState(b *testing.B) {
	for _, kind := range []tables.Kind{tables.Workareas, tables.Silver} {
		paths := []string{"path=cache-off", "path=cache-on"}
		if kind == tables.Workareas {
			paths = append(paths, "path=by-file")
		}
		for _, path := range paths {
			b.Run(fmt.Sprintf("kind=%s/%s", kind, path), func(b *testing.B) {
				d := &Drainer{workareasByFile: path == "path=by-file"}
				if path != "path=cache-off" {
					d.mergeRows = newMergeRows(DefaultMemory / MergeRowsShare)
				}
				files := benchMergeFiles
				if kind == tables.Workareas && !d.workareasByFile {
					files = 1
				}
				benchMerge(b, newMergeTable(b, kind, d, store.NewMem()), files)
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

// benchMerge fills m's table with benchMergeFiles batches of
// benchMergeRows rows, then commits three changes per op; the table holds
// files data files throughout.
func benchMerge(b *testing.B, m *mergeTable, files int) {
	for f := 0; f < benchMergeFiles; f++ {
		var todo []*item
		for j := 0; j < benchMergeRows; j++ {
			todo = append(todo, m.insert(mergeName(f, j)))
		}
		m.commit(todo...)
	}
	require.Len(b, m.w.Snapshot().Files(), files)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := mergeCPU(b)
	written := 0
	for i := 0; i < b.N; i++ {
		var todo []*item
		for f := 0; f < 3; f++ {
			todo = append(todo, m.change(mergeName((i+f)%benchMergeFiles, i%benchMergeRows), journal.StateDemoted))
		}
		written += len(m.commit(todo...).Adds)
	}
	b.StopTimer()
	b.ReportMetric(float64((mergeCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(written)/float64(b.N), "files/op")
	require.Len(b, m.w.Snapshot().Files(), files, "steady state: each commit leaves the table as many files")
}

package lakewriter

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// BenchmarkMergeSteadyState measures one steady-state MERGE table commit
// (build + Delta commit) of gold.workareas and of silver.claims on the
// memory store (the file store's fsyncs would drown the CPU in wait): the table holds mergeFiles data files of mergeRows rows
// (as the lake writer left them), and each op changes three rows already
// in it, in three files (a workareas commit: a change of three workareas;
// a silver commit: three retracts). cpu-us/op is the process's CPU
// per commit (user + system, getrusage); allocs/op and B/op are counts. mergeBenchDrainer says which path
// the drainer takes (bench_merge_internal_test.go's only difference
// between before and after).
func BenchmarkMergeSteadyState(b *testing.B) {
	for _, kind := range []tables.Kind{tables.Workareas, tables.Silver} {
		for _, path := range mergeBenchPaths {
			b.Run(fmt.Sprintf("kind=%s/%s", kind, path), func(b *testing.B) {
				benchMerge(b, kind, path)
			})
		}
	}
}

const (
	mergeFiles = 4
	mergeRows  = 6
)

// mergeCPU is the process's user+system CPU time so far.
func mergeCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchMerge(b *testing.B, kind tables.Kind, path string) {
	ctx := context.Background()
	r := newRegistry(store.NewMem(), registryOptions{MaxOpen: 10})
	key := tables.TableKey{Tenant: uuid.New(), Kind: kind}
	w, err := r.writer(ctx, key, createMissing)
	require.NoError(b, err)
	d := mergeBenchDrainer(path)
	seq := int64(0)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	// name is the key of row j of file f: files hold disjoint key ranges.
	name := func(f, j int) string { return fmt.Sprintf("k-%02d-%02d", f, j) }
	mk := func(f, j int, insert bool) *item {
		seq++
		it := &item{seq: seq, journalSeq: seq, table: key, recordedAt: at.Add(time.Duration(seq) * time.Millisecond)}
		switch kind {
		case tables.Workareas:
			it.op = journal.OpMaterialize
			it.lin = &journal.LineagePayload{WorkareaID: name(f, j), StateBefore: journal.StateHeld, StateAfter: journal.StatePromoted, Writer: "w-a"}
			if !insert {
				it.lin.StateBefore, it.lin.StateAfter = journal.StatePromoted, journal.StateDemoted
			}
		default:
			it.artifact, it.version = name(f, j), 1
			if insert {
				it.op = journal.OpMaterialize
				it.row = tables.SilverRow{ArtifactID: it.artifact, Version: 1, TenantID: key.Tenant.String(), WorkareaID: "wa",
					Writer: "w-a", Principal: "p", Provenance: "{}", PlaintextDigest: "d1", CiphertextDigest: "d2",
					Body: make([]byte, 200), State: journal.StatePromoted, PromotedBy: "p", SubmittedSeq: seq, PromotedSeq: seq,
					JournalSeq: seq, OutboxSeq: seq, UpdatedAt: it.recordedAt}.Row()
			} else {
				it.op = journal.OpRetract
				it.retract = &retract{state: journal.StateDemoted, updatedAt: it.recordedAt}
			}
		}
		return it
	}
	commit := func(todo []*item) {
		c, _, poison, err := d.buildCommit(ctx, w, key, todo)
		require.NoError(b, err)
		require.Empty(b, poison)
		c.Txn = &delta.Txn{AppID: tables.AppID, Version: seq}
		_, err = w.Commit(ctx, c)
		require.NoError(b, err)
	}
	for f := 0; f < mergeFiles; f++ {
		var todo []*item
		for j := 0; j < mergeRows; j++ {
			todo = append(todo, mk(f, j, true))
		}
		commit(todo)
	}
	require.Len(b, w.Snapshot().Files(), mergeFiles)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := mergeCPU(b)
	for i := 0; i < b.N; i++ {
		var todo []*item
		for f := 0; f < 3; f++ {
			todo = append(todo, mk((i+f)%mergeFiles, i%mergeRows, false))
		}
		commit(todo)
	}
	b.StopTimer()
	b.ReportMetric(float64((mergeCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	require.Len(b, w.Snapshot().Files(), mergeFiles, "steady state: each commit rewrites the files it changes")
}

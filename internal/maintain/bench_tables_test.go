package maintain_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
)

var (
	benchTables   = flag.Int("bench.tables", 40, "tables (half bronze.events, half silver.claims) BenchmarkMaintainTables builds")
	benchPerTable = flag.Int("bench.commits", 20, "commits (one small file each) the lake writer left in each table")
	benchInterval = flag.Int64("bench.checkpoint-interval", 0, "maintain's --checkpoint-interval in BenchmarkMaintainTables (0: the table's, else 100)")
)

// buildWriterLake writes n tables under lake as the lake writer leaves them
// after n·k batches that each touched every table: k commits per table,
// each one small file (two rows) with the writer's txn and batch record,
// checkpointed every 100 commits. Tables alternate bronze.events and
// silver.claims of n/2 tenants. It builds store.Concurrency tables at once.
func buildWriterLake(b *testing.B, lake store.Store, n, k int) []maintain.Table {
	b.Helper()
	ctx := context.Background()
	var keys []tables.TableKey
	for i := 0; len(keys) < n; i++ {
		tn := uuid.New()
		keys = append(keys, tables.TableKey{Tenant: tn, Kind: tables.Bronze}, tables.TableKey{Tenant: tn, Kind: tables.Silver})
	}
	keys = keys[:n]
	tabs := make([]maintain.Table, n)
	var g errgroup.Group
	g.SetLimit(store.Concurrency(lake))
	for i, key := range keys {
		st, err := key.Store(lake)
		require.NoError(b, err)
		tabs[i] = maintain.Table{Key: key, Store: st}
		g.Go(func() error { return writeLikeTheLakeWriter(ctx, key, st, k) })
	}
	require.NoError(b, g.Wait())
	return tabs
}

func writeLikeTheLakeWriter(ctx context.Context, key tables.TableKey, st store.Store, k int) error {
	w, err := delta.NewTable(st, key.Spec(), delta.Options{Lean: key.Kind == tables.Bronze})
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for c := 0; c < k; c++ {
		seq := int64(2*c + 1)
		rows := make([]pq.Row, 2)
		for i := range rows {
			s := seq + int64(i)
			digest := fmt.Sprintf("%064x", s)
			if key.Kind == tables.Bronze {
				rows[i] = tables.BronzeRow{TenantID: key.Tenant.String(), Seq: s, EventType: "claim.submitted", RecordedAt: now,
					PrevHash: make([]byte, 32), Hash: make([]byte, 32), Signature: make([]byte, 64), KeyID: "key-1",
					Payload: `{"ciphertext_digest":"` + digest + `"}`, OutboxSeq: s}.Row()
			} else {
				rows[i] = tables.SilverRow{ArtifactID: uuid.NewString(), Version: 1, TenantID: key.Tenant.String(), WorkareaID: "wa-1",
					Writer: "w", Principal: "p", Provenance: "observed", PlaintextDigest: digest, CiphertextDigest: digest,
					Body: make([]byte, 200), State: "promoted", PromotedBy: "p", SubmittedSeq: s, PromotedSeq: s, JournalSeq: s,
					OutboxSeq: s, UpdatedAt: now}.Row()
			}
		}
		add, err := w.WriteFile(ctx, map[string]*string{}, rows)
		if err != nil {
			return err
		}
		end := seq + 1
		if _, err := w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: []*delta.Add{add},
			Txn:   &delta.Txn{AppID: tables.AppID, Version: end},
			Extra: tables.BatchBounds{Start: seq, End: end}.CommitInfo()}); err != nil {
			return err
		}
		if _, _, err := w.MaybeCheckpoint(ctx); err != nil {
			return err
		}
	}
	return nil
}

// peakHeap samples the live heap every few milliseconds until stop is
// called, which returns the largest sample.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// passStats sums what one maintain pass did.
type passStats struct {
	took                  time.Duration
	optimized, rewritten  int
	checkpoints, commits  int
	allocs, bytes, peakHB uint64
}

func maintainPass(b *testing.B, tabs []maintain.Table, p maintain.Policy) passStats {
	b.Helper()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	stop := peakHeap()
	start := time.Now()
	reps, err := maintain.Run(context.Background(), tabs, maintain.RunOptions{Policy: p})
	took := time.Since(start)
	peak := stop()
	runtime.ReadMemStats(&m1)
	require.NoError(b, err)
	require.Len(b, reps, len(tabs))
	s := passStats{took: took, allocs: m1.Mallocs - m0.Mallocs, bytes: m1.TotalAlloc - m0.TotalAlloc, peakHB: peak}
	for _, r := range reps {
		require.Empty(b, r.Error)
		if r.Compacted != nil && r.Compacted.Version >= 0 {
			s.optimized++
			s.rewritten += r.Compacted.FilesRemoved
			s.commits++
		}
		if r.Erased != nil && r.Erased.Version >= 0 {
			s.commits++
		}
		if r.Checkpoint != nil && r.Checkpoint.Version >= 0 {
			s.checkpoints++
		}
	}
	return s
}

// BenchmarkMaintainTables builds a file lake of -bench.tables tables with
// -bench.commits small commits each (as the lake writer leaves them),
// then times one full `oml lake maintain` pass (maintain.Run with the
// command's defaults: optimize, and checkpoint when
// -bench.checkpoint-interval or the table's interval says so) and a second
// pass that finds nothing due. The build is not timed. Run with -benchtime 1x:
//
//	go test ./internal/maintain -run '^$' -bench MaintainTables -benchtime 1x \
//	    -bench.tables 10000 -bench.commits 20 -bench.checkpoint-interval 10
func BenchmarkMaintainTables(b *testing.B) {
	p := maintain.Policy{CheckpointInterval: *benchInterval}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		lake, err := store.NewFile(b.TempDir())
		require.NoError(b, err)
		buildStart := time.Now()
		tabs := buildWriterLake(b, lake, *benchTables, *benchPerTable)
		b.Logf("built %d tables x %d commits in %s", len(tabs), *benchPerTable, time.Since(buildStart).Round(time.Millisecond))
		b.StartTimer()
		first := maintainPass(b, tabs, p)
		second := maintainPass(b, tabs, p)
		b.StopTimer()
		n := float64(len(tabs))
		b.Logf("pass 1: %s, %.0f tables/s, %d tables optimized (%d files rewritten), %d checkpoints, %d commits, %d allocs, %d MiB allocated, peak heap %d MiB",
			first.took.Round(time.Millisecond), n/first.took.Seconds(), first.optimized, first.rewritten, first.checkpoints, first.commits,
			first.allocs, first.bytes>>20, first.peakHB>>20)
		b.Logf("pass 2: %s, %.0f tables/s, %d commits, %d checkpoints, %d allocs, %d MiB allocated, peak heap %d MiB",
			second.took.Round(time.Millisecond), n/second.took.Seconds(), second.commits, second.checkpoints,
			second.allocs, second.bytes>>20, second.peakHB>>20)
		require.Zero(b, second.commits+second.checkpoints, "the second pass finds nothing due")
		b.ReportMetric(float64(first.took.Nanoseconds())/n, "pass1-ns/table")
		b.ReportMetric(n/first.took.Seconds(), "pass1-tables/s")
		b.ReportMetric(float64(first.rewritten), "pass1-files-rewritten")
		b.ReportMetric(float64(first.commits), "pass1-commits")
		b.ReportMetric(float64(first.checkpoints), "pass1-checkpoints")
		b.ReportMetric(float64(first.allocs)/n, "pass1-allocs/table")
		b.ReportMetric(float64(first.bytes)/n, "pass1-B/table")
		b.ReportMetric(float64(first.peakHB>>20), "pass1-peak-heap-MiB")
		b.ReportMetric(float64(second.took.Nanoseconds())/n, "pass2-ns/table")
		b.ReportMetric(n/second.took.Seconds(), "pass2-tables/s")
		b.ReportMetric(float64(second.allocs)/n, "pass2-allocs/table")
		b.ReportMetric(float64(second.bytes)/n, "pass2-B/table")
		b.ReportMetric(float64(second.peakHB>>20), "pass2-peak-heap-MiB")
	}
}

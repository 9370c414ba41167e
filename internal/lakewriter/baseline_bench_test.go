package lakewriter_test

import (
	"context"
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

var (
	benchDatabaseURL = flag.String("bench.database-url", "", "BenchmarkBaselineExport: the database whose outbox to export (scripts/bench passes it)")
	benchFileSync    = flag.String("bench.file-sync", "", "BenchmarkBaselineExport and the file lakes of BenchmarkDrain and BenchmarkFrontierLag: the file store's flush mode (auto, file or group; empty: the store's default, auto), so the baseline writes as the drain it is compared with does (scripts/bench's BENCH_FILE_SYNC)")
)

// BenchmarkBaselineExport is the no-Delta baseline of scripts/bench: the
// whole outbox of an existing database (-bench.database-url), read in
// 10,000-row batches with the lake writer's own query and row check, each
// table's rows written as one Parquet file per batch with the project's
// Parquet writer into one folder per tenant table on a fresh file store
// (flushed as -bench.file-sync says) —
// no snapshot, no txn, no commit, no MERGE. scripts/bench runs it beside
// `oml lake drain --once` on the same backlog and prints the ratio.
func BenchmarkBaselineExport(b *testing.B) {
	if *benchDatabaseURL == "" {
		b.Skip("needs -bench.database-url (run through scripts/bench)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *benchDatabaseURL)
	require.NoError(b, err)
	defer pool.Close()
	var last int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM oml.outbox`).Scan(&last))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		url := "file://" + b.TempDir()
		if *benchFileSync != "" {
			url += "?sync=" + *benchFileSync
		}
		lake, err := store.Open(ctx, url)
		require.NoError(b, err)
		var r0, r1 syscall.Rusage
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &r0))
		b.StartTimer()
		start := time.Now()
		n := rawExport(b, pool, lake, 0, last, 10000)
		el := time.Since(start)
		b.StopTimer()
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &r1))
		cpu := time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
		b.ReportMetric(el.Seconds(), "wall_s")
		b.ReportMetric(cpu.Seconds(), "cpu_s")
		b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
		b.ReportMetric(float64(n), "rows")
		b.ReportMetric(float64(r1.Maxrss)/1024, "peak_rss_MiB")
	}
}

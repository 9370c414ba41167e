package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

func benchStores(b *testing.B, fn func(b *testing.B, s store.Store)) {
	b.Run("file", func(b *testing.B) {
		s, err := store.NewFile(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		fn(b, s)
	})
	b.Run("s3", func(b *testing.B) {
		fn(b, s3test.NewBucket(b, nil).Store)
	})
}

// BenchmarkPutIfAbsentCommit measures the commit primitive: one ~1 KB JSON
// commit file per operation, each to a new version key. It reports the
// median and 99th-percentile latency.
func BenchmarkPutIfAbsentCommit(b *testing.B) {
	body := bytes.Repeat([]byte(`{"add":{"path":"part-00000.parquet","size":1024}}`+"\n"), 20)
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := s.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", i), body); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	})
}

const eightMB = 8 << 20

func benchBody(b *testing.B) []byte {
	body := make([]byte, eightMB)
	if _, err := rand.Read(body); err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkPut8MB measures data-file write throughput (MB/s).
func BenchmarkPut8MB(b *testing.B) {
	body := benchBody(b)
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		b.SetBytes(eightMB)
		for i := 0; i < b.N; i++ {
			if err := s.Put(ctx, fmt.Sprintf("part-%05d.parquet", i%4), bytes.NewReader(body), eightMB); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGet8MB measures whole-object read throughput (MB/s).
func BenchmarkGet8MB(b *testing.B) {
	body := benchBody(b)
	benchStores(b, func(b *testing.B, s store.Store) {
		ctx := context.Background()
		if err := s.Put(ctx, "part-0.parquet", bytes.NewReader(body), eightMB); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(eightMB)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := s.Get(ctx, "part-0.parquet")
			if err != nil || len(got) != eightMB {
				b.Fatal(len(got), err)
			}
		}
	})
}

// BenchmarkFilePut and BenchmarkFilePutIfAbsent measure small writes into a
// directory that already exists, the file store's common case: the
// in-flight directory-creation fence must cost nothing measurable next to
// the two fsyncs of every write.
func BenchmarkFilePut(b *testing.B) {
	benchFileSmallWrites(b, func(ctx context.Context, s *store.File, key string, body []byte) error {
		return s.Put(ctx, key, bytes.NewReader(body), int64(len(body)))
	})
}

func BenchmarkFilePutIfAbsent(b *testing.B) {
	benchFileSmallWrites(b, func(ctx context.Context, s *store.File, key string, body []byte) error {
		return s.PutIfAbsent(ctx, key, body)
	})
}

func benchFileSmallWrites(b *testing.B, write func(ctx context.Context, s *store.File, key string, body []byte) error) {
	ctx := context.Background()
	s, err := store.NewFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte(`{"add":{"path":"part-00000.parquet","size":1024}}`+"\n"), 20)
	if err := s.Put(ctx, "t/_delta_log/_last_checkpoint", nil, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := write(ctx, s, fmt.Sprintf("t/_delta_log/%020d.json", i), body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFileCommitPairs measures what a table commit asks of a file
// lake: a data file Put, then the log entry's PutIfAbsent, each pair in a
// fresh table directory (so the directories are created too), from N
// goroutines at once, per-file fsyncs against group syncfs rounds. ns/op
// is wall time per pair at that concurrency; cpu-µs/pair the process's
// user and system CPU per pair (the kernel's flusher threads not counted).
// put=owed puts the data file as the Delta writer does (store.PutOwed: in
// rounds its flush is the commit's), put=plain with Put, the baseline in
// the same run.
func BenchmarkFileCommitPairs(b *testing.B) {
	data := bytes.Repeat([]byte("parquet!"), 512) // 4 KiB, a small batch's file
	commit := bytes.Repeat([]byte(`{"add":{"path":"part-00000.parquet","size":4096}}`+"\n"), 20)
	puts := []struct {
		name string
		put  func(ctx context.Context, s store.Store, key string, r io.Reader, size int64) error
	}{
		{"plain", func(ctx context.Context, s store.Store, key string, r io.Reader, size int64) error {
			return s.Put(ctx, key, r, size)
		}},
		{"owed", store.PutOwed},
	}
	for _, mode := range []store.FileSync{store.SyncPerFile, store.SyncGroup, store.SyncAuto} {
		for _, n := range []int{4, 16, 32, 64} {
			for _, put := range puts {
				if mode == store.SyncPerFile && put.name == "owed" {
					continue // per file an owed put is a Put
				}
				b.Run(fmt.Sprintf("sync=%s/goroutines=%d/put=%s", mode, n, put.name), func(b *testing.B) {
					s, err := store.NewFile(b.TempDir(), store.WithSync(mode))
					if err != nil {
						b.Fatal(err)
					}
					ctx := context.Background()
					var next atomic.Int64
					var wg sync.WaitGroup
					cpu0 := processCPU(b)
					b.ResetTimer()
					for g := range n {
						wg.Go(func() {
							for {
								i := next.Add(1)
								if i > int64(b.N) {
									return
								}
								table := fmt.Sprintf("tenant-%d/bronze/t-%d/", g, i)
								if err := put.put(ctx, s, table+"part-00000.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
									b.Error(err)
									return
								}
								if err := s.PutIfAbsent(ctx, table+"_delta_log/00000000000000000000.json", commit); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
					b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/pair")
				})
			}
		}
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFileNewTenantTrees measures what an empty file lake asks of the
// store when a drain meets new tenants (per-file flushes, the default):
// for each tenant, four tables in three layers each get a data file Put
// and their first commit's PutIfAbsent, and the tenant's witness directory
// its first object — 13 new directories per tenant, each fsynced into its
// parent. The jobs run in the drain's order (a tenant's tables one after
// the other) on store.FileConcurrency goroutines. trees=existing is the
// baseline in the same run: the same writes into trees made beforehand,
// so the difference is what creating the directories costs. Each new
// table's _delta_log/ is prepared before its data file, as the Delta
// writer does (store.PrepareDir). ns/op and
// cpu-µs/tenant are per tenant.
func BenchmarkFileNewTenantTrees(b *testing.B) {
	data := bytes.Repeat([]byte("parquet!"), 512)
	commit := bytes.Repeat([]byte(`{"add":{"path":"part-00000.parquet","size":4096}}`+"\n"), 20)
	tables := []string{"bronze/events", "silver/claims", "gold/lineage", "gold/workareas"}
	// version v of job j of a tenant: 0-3 its tables, 4 its witness.
	write := func(ctx context.Context, s *store.File, tenant, job, v int) error {
		t := fmt.Sprintf("%08d-tenant", tenant)
		if job == len(tables) {
			return s.PutIfAbsent(ctx, fmt.Sprintf("_oml_witness/%s/%020d.json", t, v), commit)
		}
		table := t + "/" + tables[job] + "/"
		if v == 0 { // as the Delta writer does before a new table's first data file
			if err := store.PrepareDir(ctx, s, table+"_delta_log"); err != nil {
				return err
			}
		}
		if err := s.Put(ctx, fmt.Sprintf("%spart-%05d.parquet", table, v), bytes.NewReader(data), int64(len(data))); err != nil {
			return err
		}
		return s.PutIfAbsent(ctx, fmt.Sprintf("%s_delta_log/%020d.json", table, v), commit)
	}
	for _, trees := range []string{"new", "existing"} {
		b.Run("trees="+trees, func(b *testing.B) {
			s, err := store.NewFile(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			jobs := len(tables) + 1
			v := 0
			if trees == "existing" {
				v = 1 // new keys in the trees version 0 made
				for i := range b.N {
					for j := range jobs {
						if err := write(ctx, s, i, j, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range store.FileConcurrency {
				wg.Go(func() {
					for {
						n := next.Add(1) - 1
						if n >= int64(b.N*jobs) {
							return
						}
						if err := write(ctx, s, int(n)/jobs, int(n)%jobs, v); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/tenant")
		})
	}
}

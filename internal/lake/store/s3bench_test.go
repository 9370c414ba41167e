package store_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

// BenchmarkS3CommitPairs is the S3 requests of a lake writer's table
// commit, many at once: a 4 KB data file (Put) and a 1 KB commit
// (PutIfAbsent), each to a new key. It reports the CPU of this process
// (the client) and of the server per pair, at store.S3Concurrency on a
// server that keeps connections open (as S3 does) and on one that closes
// each (versitygw's default), and at other concurrencies kept open:
//
//	go test -run '^$' -bench S3CommitPairs -benchtime 4000x ./internal/lake/store/
func BenchmarkS3CommitPairs(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4<<10)
	commit := bytes.Repeat([]byte(`{"add":{"path":"part-00000.parquet","size":1024}}`+"\n"), 20)
	type variant struct {
		closeEach bool
		workers   int
	}
	variants := []variant{{false, store.S3Concurrency}, {true, store.S3Concurrency}, {false, 16}, {false, 64}, {false, 128}}
	for _, v := range variants {
		closeEach := v.closeEach
		b.Run(fmt.Sprintf("close-each-connection=%t/at-once=%d", closeEach, v.workers), func(b *testing.B) {
			srv, err := s3test.StartWith(s3test.Options{CloseEachConnection: closeEach})
			if err != nil {
				b.Skip(err)
			}
			defer srv.Stop()
			ctx := context.Background()
			st, err := store.OpenS3(ctx, srv.Config("bench"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: new("bench")}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			pair := func() error {
				i := next.Add(1)
				if err := st.Put(ctx, fmt.Sprintf("t%d/part-0.parquet", i), bytes.NewReader(data), int64(len(data))); err != nil {
					return err
				}
				return st.PutIfAbsent(ctx, fmt.Sprintf("t%d/_delta_log/%020d.json", i, 0), commit)
			}
			next.Store(-1 << 40) // warm-up keys, apart from the measured ones
			if err := pair(); err != nil {
				b.Fatal(err)
			}
			next.Store(0)
			cpu0, srv0 := processCPU(b), serverCPU(b, srv)
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			var failed atomic.Value
			for w := 0; w < v.workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Load() < int64(b.N) {
						if err := pair(); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			n := float64(next.Load())
			b.ReportMetric(n/time.Since(t0).Seconds(), "pairs/s")
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/n, "client-cpu-µs/pair")
			b.ReportMetric(float64((serverCPU(b, srv)-srv0).Microseconds())/n, "server-cpu-µs/pair")
		})
	}
}

func serverCPU(b *testing.B, srv *s3test.Server) time.Duration {
	d, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
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

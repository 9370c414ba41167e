package maintain_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
)

var (
	benchCommits = flag.Int("maintain.commits", 500, "commits (one small file each) the optimize benchmark's table is built from")
	benchRows    = flag.Int("maintain.rows", 10, "rows per commit in the optimize benchmark")
)

// buildBronzeLike writes a bronze-shaped table (10 columns, ~340 B of
// random binary per row) from n commits of rows rows each, checkpointing
// every 100 commits as the lake writer does.
func buildBronzeLike(b *testing.B, st store.Store, n, rows int) {
	b.Helper()
	ctx := context.Background()
	str := func(s string) delta.StructField { return delta.Field(s, delta.Prim(delta.TypeString), true) }
	bin := func(s string) delta.StructField { return delta.Field(s, delta.Prim(delta.TypeBinary), true) }
	schema := &delta.StructType{Fields: []delta.StructField{
		str("tenant_id"), delta.Field("seq", delta.Prim(delta.TypeLong), true), str("event_type"),
		delta.Field("recorded_at", delta.Prim(delta.TypeTimestamp), true),
		bin("prev_hash"), bin("hash"), bin("signature"), str("key_id"), str("payload"),
		delta.Field("outbox_seq", delta.Prim(delta.TypeLong), true),
	}}
	w, err := delta.CreateTable(ctx, st, delta.TableSpec{Schema: schema}, delta.Options{})
	require.NoError(b, err)
	tenant := uuid.NewString()
	seq := int64(0)
	for c := 0; c < n; c++ {
		batch := make([]pq.Row, rows)
		for i := range batch {
			seq++
			h, p, sig := make([]byte, 32), make([]byte, 32), make([]byte, 64)
			_, _ = rand.Read(h)
			_, _ = rand.Read(p)
			_, _ = rand.Read(sig)
			batch[i] = tables.BronzeRow{TenantID: tenant, Seq: seq, EventType: "claim.submitted", RecordedAt: time.Now().UTC(),
				PrevHash: p, Hash: h, Signature: sig, KeyID: "key-1",
				Payload: fmt.Sprintf(`{"artifact_id":"%s","version":1,"ciphertext_digest":"%x"}`, uuid.NewString(), h), OutboxSeq: seq}.Row()
		}
		add, err := w.WriteFile(ctx, map[string]*string{}, batch)
		require.NoError(b, err)
		_, err = w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: []*delta.Add{add},
			Txn: &delta.Txn{AppID: tables.AppID, Version: seq}})
		require.NoError(b, err)
		_, _, err = w.MaybeCheckpoint(ctx)
		require.NoError(b, err)
	}
}

// readAll is what a cold reader pays: load the snapshot, scan every row.
func readAll(b *testing.B, st store.Store) (time.Duration, int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	snap, err := delta.Load(ctx, st)
	require.NoError(b, err)
	n := 0
	require.NoError(b, snap.Scan(ctx, st, delta.ScanOptions{}, func(_ *delta.Add, rows []pq.Row) error {
		n += len(rows)
		return nil
	}))
	return time.Since(start), n
}

func bestRead(b *testing.B, st store.Store) (time.Duration, int) {
	best, n := readAll(b, st)
	for i := 0; i < 2; i++ {
		if d, _ := readAll(b, st); d < best {
			best = d
		}
	}
	return best, n
}

// BenchmarkOptimize builds a table from -maintain.commits small commits
// (default 500; the figure is 10,000), then measures a cold full
// read, the compaction (throughput over the bytes it reads), and the cold
// full read again. Run with -benchtime 1x:
//
//	go test ./internal/maintain -run '^$' -bench Optimize -benchtime 1x -maintain.commits 10000
func BenchmarkOptimize(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := testkit.FileLake(b)
		buildBronzeLike(b, st, *benchCommits, *benchRows)
		before, rows := bestRead(b, st)
		tab := maintain.Table{Key: tables.TableKey{Kind: tables.Bronze}, Store: st}
		b.StartTimer()
		start := time.Now()
		r, err := maintain.Compact(context.Background(), tab, maintain.CompactOptions{})
		took := time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, *benchCommits, r.FilesRemoved)
		_, err = maintain.CheckpointTable(context.Background(), tab)
		require.NoError(b, err)
		after, rows2 := bestRead(b, st)
		require.Equal(b, rows, rows2)
		b.ReportMetric(float64(r.BytesRemoved)/1e6/took.Seconds(), "MB/s")
		b.ReportMetric(float64(r.BytesRemoved)/1e6, "MB-in")
		b.ReportMetric(float64(r.FilesAdded), "files-out")
		b.ReportMetric(float64(before.Milliseconds()), "read-before-ms")
		b.ReportMetric(float64(after.Milliseconds()), "read-after-ms")
		b.ReportMetric(before.Seconds()/after.Seconds(), "read-speedup-x")
	}
}

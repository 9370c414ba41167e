package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

// benchCommits commits one add + txn per iteration: the lake writer's
// per-batch commit, minus the data file.
func benchCommits(b *testing.B, st store.Store) {
	ctx := context.Background()
	w, err := CreateTable(ctx, st, TableSpec{Schema: testSchema()}, Options{})
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "oml-lakewriter", Version: int64(i + 1)}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/commit")
}

func BenchmarkCommitFile(b *testing.B) {
	fs, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	benchCommits(b, fs)
}

func BenchmarkCommitS3(b *testing.B) {
	benchCommits(b, store.MustSub(s3test.NewBucket(b, nil).Store, "t/bronze/events"))
}

var (
	bigTableOnce sync.Once
	bigTableDir  string
)

// bigTable writes a 10,000-commit table (one add + txn each) straight to
// disk once per benchmark binary, plus a copy with a checkpoint at 9,990.
func bigTable(b *testing.B) (noCP, withCP string) {
	bigTableOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oml-delta-bench-")
		require.NoError(b, err)
		bigTableDir = dir
		noCP := filepath.Join(dir, "nocp", LogDir)
		require.NoError(b, os.MkdirAll(noCP, 0o755))
		schemaString, _ := MarshalSchema(testSchema())
		created := time.Now().UnixMilli()
		for v := int64(0); v < 10000; v++ {
			acts := []Action{{CommitInfo: []byte(fmt.Sprintf(`{"timestamp":%d,"operation":"WRITE"}`, created))}}
			if v == 0 {
				acts = append(acts, Action{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
					Action{MetaData: &Metadata{ID: "bench", Format: Format{Provider: "parquet"}, SchemaString: schemaString, PartitionColumns: []string{}, Configuration: map[string]string{}, CreatedTime: &created}})
			}
			lu := created
			acts = append(acts, Action{Add: fakeAdd("")}, Action{Txn: &Txn{AppID: "oml-lakewriter", Version: v, LastUpdated: &lu}})
			body, err := EncodeCommit(acts)
			require.NoError(b, err)
			require.NoError(b, os.WriteFile(filepath.Join(dir, "nocp", CommitKey(v)), body, 0o644))
		}
		// The same log plus a checkpoint at 9,990.
		cp := filepath.Join(dir, "cp")
		require.NoError(b, os.CopyFS(cp, os.DirFS(filepath.Join(dir, "nocp"))))
		st, err := store.NewFile(cp)
		require.NoError(b, err)
		snap, err := Load(context.Background(), st, AtVersion(9990))
		require.NoError(b, err)
		_, err = WriteCheckpoint(context.Background(), st, snap, time.Now())
		require.NoError(b, err)
	})
	return filepath.Join(bigTableDir, "nocp"), filepath.Join(bigTableDir, "cp")
}

func benchOpen(b *testing.B, dir string, wantCP int64) {
	st, err := store.NewFile(dir)
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := Load(context.Background(), st)
		if err != nil {
			b.Fatal(err)
		}
		if snap.Version() != 9999 || snap.NumFiles() != 10000 || snap.CheckpointVersion() != wantCP {
			b.Fatalf("version %d, %d files, checkpoint %d", snap.Version(), snap.NumFiles(), snap.CheckpointVersion())
		}
	}
}

// BenchmarkOpen10kCommitsNoCheckpoint replays 10,000 JSON commits.
func BenchmarkOpen10kCommitsNoCheckpoint(b *testing.B) {
	noCP, _ := bigTable(b)
	benchOpen(b, noCP, -1)
}

// BenchmarkOpen10kCommitsWithCheckpoint reads the checkpoint at 9,990 plus 9 commits.
func BenchmarkOpen10kCommitsWithCheckpoint(b *testing.B) {
	_, cp := bigTable(b)
	benchOpen(b, cp, 9990)
}

// BenchmarkCheckpoint writes the checkpoint of a 10,000- and a
// 100,000-file snapshot to the file store and reports the peak heap growth
// above the snapshot itself while doing so (sampled every millisecond, with
// GOGC=10 so the figure tracks live memory rather than GC pacing). Flat
// memory means the growth does not scale with the number of files.
func BenchmarkCheckpoint(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) { benchCheckpoint(b, n) })
	}
}

func benchCheckpoint(b *testing.B, nFiles int) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	snap := newSnapshot("bench")
	snap.version = 100000
	snap.protocol = Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	schemaString, _ := MarshalSchema(testSchema())
	snap.metadata = Metadata{ID: "bench", Format: Format{Provider: "parquet"}, SchemaString: schemaString, PartitionColumns: []string{"day"}, Configuration: map[string]string{}}
	for i := 0; i < nFiles; i++ {
		a := fakeAdd(fmt.Sprintf("2026-01-%02d", 1+i%28))
		a.Stats = fmt.Sprintf(`{"numRecords":%d,"minValues":{"id":%d,"name":"aaaaaaaa"},"maxValues":{"id":%d,"name":"zzzzzzzz"},"nullCount":{"id":0,"name":0}}`, 100, i*100, i*100+99)
		key, _ := DecodePath(a.Path)
		snap.files[key] = a
	}
	lu := time.Now().UnixMilli()
	snap.txns.put("oml-lakewriter").txn = Txn{AppID: "oml-lakewriter", Version: 100000, LastUpdated: &lu}
	fs, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
			}
		}
	}()
	b.ResetTimer()
	var res CheckpointResult
	for i := 0; i < b.N; i++ {
		res, err = WriteCheckpoint(context.Background(), fs, snap, time.Now())
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapAlloc))/(1<<20), "peakHeapGrowthMiB")
	b.ReportMetric(float64(base.HeapAlloc)/(1<<20), "snapshotHeapMiB")
	b.ReportMetric(float64(res.SizeInBytes)/(1<<20), "checkpointMiB")
}

func benchSchemaBronze() *StructType {
	return &StructType{Fields: []StructField{
		Field("tenant_id", Prim(TypeString), false), Field("seq", Prim(TypeLong), false),
		Field("event_type", Prim(TypeString), false), Field("recorded_at", Prim(TypeTimestamp), false),
		Field("prev_hash", Prim(TypeBinary), true), Field("hash", Prim(TypeBinary), false),
		Field("signature", Prim(TypeBinary), false), Field("key_id", Prim(TypeString), false),
		Field("payload", Prim(TypeBinary), false), Field("outbox_seq", Prim(TypeLong), false),
	}}
}

func benchSchemaSilver() *StructType {
	return &StructType{Fields: []StructField{
		Field("artifact_id", Prim(TypeString), false), Field("version", Prim(TypeInteger), false),
		Field("tenant_id", Prim(TypeString), false), Field("workarea_id", Prim(TypeString), true),
		Field("writer", Prim(TypeString), true), Field("principal", Prim(TypeString), true),
		Field("provenance", Prim(TypeString), true), Field("plaintext_digest", Prim(TypeBinary), false),
		Field("ciphertext_digest", Prim(TypeBinary), false), Field("body", Prim(TypeBinary), false),
		Field("state", Prim(TypeString), false), Field("outbox_seq", Prim(TypeLong), false),
	}}
}

func randBytes(n int, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// benchWriteFile measures WriteFile (Parquet encoding, stats, and the file
// store's fsync'd write) for batches of 10,000 rows: MB/s of file written
// and rows/s.
func benchWriteFile(b *testing.B, schema *StructType, row func(i int) []any) {
	ctx := context.Background()
	fs, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	w, err := CreateTable(ctx, fs, TableSpec{Schema: schema}, Options{})
	require.NoError(b, err)
	const n = 10000
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = row(i)
	}
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		add, err := w.WriteFile(ctx, map[string]*string{}, rows)
		if err != nil {
			b.Fatal(err)
		}
		bytes += add.Size
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(bytes)/sec/(1<<20), "fileMB/s")
	b.ReportMetric(float64(n*b.N)/sec, "rows/s")
}

func BenchmarkWriteFileBronze(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	benchWriteFile(b, benchSchemaBronze(), func(i int) []any {
		return []any{"0b4c2a3e-8f1d-4c55-9a63-2f0e8d7c6b5a", int64(i), "claim.submitted", t0.Add(time.Duration(i) * time.Millisecond),
			randBytes(32, i), randBytes(32, i+1), randBytes(64, i+2), "k1-ed25519-3f9c", randBytes(200, i+3), int64(1000 + i)}
	})
}

func BenchmarkWriteFileSilver(b *testing.B) {
	benchWriteFile(b, benchSchemaSilver(), func(i int) []any {
		return []any{fmt.Sprintf("art-%08d", i), int32(1 + i%3), "0b4c2a3e-8f1d-4c55-9a63-2f0e8d7c6b5a", "wa-7", "agent:planner", "user:alice", "observed",
			randBytes(32, i), randBytes(32, i+1), randBytes(1024, i+2), "promoted", int64(1000 + i)}
	})
}

// BenchmarkOpenCheckpoint100kFiles opens a table whose state is one
// checkpoint of 100,000 live files (plus one later commit).
func BenchmarkOpenCheckpoint100kFiles(b *testing.B) {
	ctx := context.Background()
	fs, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	w, err := CreateTable(ctx, fs, TableSpec{Schema: testSchema(), PartitionColumns: []string{"day"}}, Options{})
	require.NoError(b, err)
	adds := make([]*Add, 0, 100000)
	for i := 0; i < 100000; i++ {
		a := fakeAdd(fmt.Sprintf("2026-01-%02d", 1+i%28))
		a.Stats = fmt.Sprintf(`{"numRecords":100,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, i*100, i*100+99)
		adds = append(adds, a)
	}
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: adds})
	require.NoError(b, err)
	_, err = w.Checkpoint(ctx)
	require.NoError(b, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("2026-02-01")}})
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := Load(ctx, fs)
		if err != nil {
			b.Fatal(err)
		}
		if snap.NumFiles() != 100001 || snap.CheckpointVersion() != 1 {
			b.Fatalf("%d files, checkpoint %d", snap.NumFiles(), snap.CheckpointVersion())
		}
	}
}

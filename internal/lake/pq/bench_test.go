package pq

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds is the CPU time this process has used (user + system, all
// threads). The benchmarks report throughput per CPU-second besides the usual
// wall-clock figures because the development machines are shared: wall time
// swings several-fold with other load, CPU time much less.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func reportCPU(b *testing.B, cpu0 float64, rows int, raw int64) {
	cpu := cpuSeconds(b) - cpu0
	b.ReportMetric(float64(rows)*float64(b.N)/cpu, "rows/cpu-s")
	b.ReportMetric(float64(raw)*float64(b.N)/cpu/1e6, "MB/cpu-s")
}

// The benchmark schemas mirror the lake tables (BRIEF: bronze.events,
// silver.claims). Values are shaped like the real ones: random 32-byte hashes
// and 64-byte signatures, a ~300 B digest-only JSON payload, a ~2 KB
// ciphertext body (incompressible).

func bronzeSchema() *Schema {
	return NewSchema(
		Required("tenant_id", String),
		Required("seq", Int64),
		Required("event_type", String),
		Required("recorded_at", Timestamp),
		Nullable("prev_hash", Binary),
		Required("hash", Binary),
		Required("signature", Binary),
		Required("key_id", String),
		Required("payload", String),
		Required("outbox_seq", Int64),
	)
}

func silverSchema() *Schema {
	return NewSchema(
		Required("artifact_id", String),
		Required("version", Int64),
		Required("tenant_id", String),
		Nullable("workarea_id", String),
		Nullable("writer", String),
		Nullable("principal", String),
		Nullable("provenance", String),
		Required("plaintext_digest", Binary),
		Required("ciphertext_digest", Binary),
		Nullable("body", Binary),
		Required("state", String),
		Required("outbox_seq", Int64),
	)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func uuidLike(r *rand.Rand) string {
	h := hex.EncodeToString(randBytes(r, 16))
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var eventTypes = []string{"claim.submitted", "claim.promoted", "claim.demoted", "claim.erased", "claim.reassigned", "simulation.ended", "tenant.genesis"}

// bronzeRows returns n rows and the raw byte size of their values.
func bronzeRows(n int) ([]Row, int64) {
	r := rand.New(rand.NewPCG(1, 2))
	tenants := []string{uuidLike(r), uuidLike(r), uuidLike(r), uuidLike(r)}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rows := make([]Row, n)
	var raw int64
	prev := randBytes(r, 32)
	for i := range rows {
		hash := randBytes(r, 32)
		payload := fmt.Sprintf(`{"artifact_id":"%s","version":%d,"plaintext_digest":"%s","ciphertext_digest":"%s","workarea":"wa-%d","writer":"agent-%d"}`,
			uuidLike(r), i%7, hex.EncodeToString(randBytes(r, 32)), hex.EncodeToString(randBytes(r, 32)), i%13, i%5)
		row := Row{tenants[i%len(tenants)], int64(i + 1), eventTypes[i%len(eventTypes)], base.Add(time.Duration(i) * time.Millisecond),
			prev, hash, randBytes(r, 64), "k-2026-01-primary", payload, int64(i + 1000)}
		prev = hash
		raw += int64(len(row[0].(string))) + 8 + int64(len(row[2].(string))) + 8 + 32 + 32 + 64 + 17 + int64(len(payload)) + 8
		rows[i] = row
	}
	return rows, raw
}

func silverRows(n int) ([]Row, int64) {
	r := rand.New(rand.NewPCG(3, 4))
	tenant := uuidLike(r)
	states := []string{"promoted", "demoted", "erased", "simulation_ended", "reassigned"}
	rows := make([]Row, n)
	var raw int64
	for i := range rows {
		body := randBytes(r, 2048)
		row := Row{uuidLike(r), int64(i % 3), tenant, fmt.Sprintf("wa-%d", i%50), fmt.Sprintf("agent-%d", i%20),
			fmt.Sprintf("user-%d@example.com", i%100), "human", randBytes(r, 32), randBytes(r, 32), body, states[i%len(states)], int64(i + 1)}
		for _, v := range row {
			switch x := v.(type) {
			case string:
				raw += int64(len(x))
			case []byte:
				raw += int64(len(x))
			default:
				raw += 8
			}
		}
		rows[i] = row
	}
	return rows, raw
}

type discard struct{ n int64 }

func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

func benchWrite(b *testing.B, s *Schema, rows []Row, raw int64, opts Options) {
	b.SetBytes(raw)
	b.ReportAllocs()
	var size int64
	cpu0 := cpuSeconds(b)
	for b.Loop() {
		w, err := NewWriter(&discard{}, s, opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(rows); i += 1000 {
			if err := w.Write(rows[i:min(i+1000, len(rows))]); err != nil {
				b.Fatal(err)
			}
		}
		meta, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		size = meta.Size
	}
	reportCPU(b, cpu0, len(rows), raw)
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size)/float64(raw), "file/raw")
}

func BenchmarkWriteBronzeSnappy(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchWrite(b, bronzeSchema(), rows, raw, Options{Compression: Snappy})
}

func BenchmarkWriteBronzeZstd(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchWrite(b, bronzeSchema(), rows, raw, Options{Compression: Zstd})
}

func BenchmarkWriteSilverSnappy(b *testing.B) {
	rows, raw := silverRows(20_000)
	benchWrite(b, silverSchema(), rows, raw, Options{Compression: Snappy})
}

func BenchmarkWriteSilverZstd(b *testing.B) {
	rows, raw := silverRows(20_000)
	benchWrite(b, silverSchema(), rows, raw, Options{Compression: Zstd})
}

func benchRead(b *testing.B, s *Schema, rows []Row, raw int64, opts Options, cols ...string) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Write(rows); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(raw)
	b.ReportAllocs()
	cpu0 := cpuSeconds(b)
	for b.Loop() {
		f, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		rs, err := f.Rows(cols...)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			batch, err := rs.Next(1024)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		if n != len(rows) {
			b.Fatalf("read %d rows, want %d", n, len(rows))
		}
	}
	reportCPU(b, cpu0, len(rows), raw)
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkReadBronzeSnappy(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchRead(b, bronzeSchema(), rows, raw, Options{Compression: Snappy})
}

func BenchmarkReadBronzeZstd(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchRead(b, bronzeSchema(), rows, raw, Options{Compression: Zstd})
}

func BenchmarkReadSilverSnappy(b *testing.B) {
	rows, raw := silverRows(20_000)
	benchRead(b, silverSchema(), rows, raw, Options{Compression: Snappy})
}

// BenchmarkReadBronzeProjected reads two small columns only (what reconcile needs).
func BenchmarkReadBronzeProjected(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchRead(b, bronzeSchema(), rows, raw, Options{Compression: Snappy}, "tenant_id", "seq")
}

func BenchmarkWriteBronzeZstdLevel3(b *testing.B) {
	rows, raw := bronzeRows(50_000)
	benchWrite(b, bronzeSchema(), rows, raw, Options{Compression: Zstd, ZstdLevel: 3})
}

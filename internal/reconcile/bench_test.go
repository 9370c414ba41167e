package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
)

var (
	benchClaims   = flag.Int("reconcile.claims", 5000, "claims in BenchmarkReconcile (1000000 for the measured run)")
	benchBodySize = flag.Int("reconcile.body", 256, "ciphertext bytes per claim in BenchmarkReconcile")
	benchPerFile  = flag.Int("reconcile.perfile", 10000, "rows per generated data file (the lake writer's default batch is 10,000 rows)")
)

// BenchmarkReconcile measures oml reconcile on one tenant with
// -reconcile.claims claims (90% promoted, so in silver) and two journal
// events per claim (so 2N bronze rows), built directly — COPY and
// generate_series into PostgreSQL, bulk Parquet files into the lake (file
// store) with the lake writer's txn action — because the append path would
// take hours at a million. Reported: seconds per run, claims/s, and the
// peak Go heap in use sampled every 10ms during the run (the bound the
// package doc describes), besides ns/op.
//
//	go test -run '^$' -bench BenchmarkReconcile -benchtime 1x -reconcile.claims 1000000 ./internal/reconcile/
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	n := *benchClaims
	bb := setupBench(b, n, *benchBodySize)
	for _, skip := range []bool{false, true} {
		name := "bodies"
		if skip {
			name = "skip-bodies"
		}
		b.Run(name, func(b *testing.B) {
			var peak atomic.Uint64
			var rss int64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				resetPeakRSS()
				stop := sampleHeap(&peak)
				rep, err := reconcile.Run(ctx, bb.pool, bb.lake, reconcile.Options{Tenant: &bb.tenant, StaleAfter: -1, SkipBodies: skip, TempDir: b.TempDir()})
				stop()
				rss = max(rss, peakRSS())
				require.NoError(b, err)
				if !rep.OK {
					for _, f := range rep.Findings[:min(10, len(rep.Findings))] {
						b.Logf("%s %s v%d seq %d: %s", f.Class, f.ArtifactID, f.Version, f.Seq, f.Detail)
					}
					b.Fatalf("the generated lake should reconcile clean: %v", rep.Counts)
				}
				require.EqualValues(b, n+1, rep.Stats.Claims)
				b.ReportMetric(rep.Stats.ElapsedSeconds, "s/run")
				b.ReportMetric(float64(n)/rep.Stats.ElapsedSeconds, "claims/s")
				b.ReportMetric(float64(rep.Stats.SortRuns), "sort-runs")
			}
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			if rss > 0 {
				b.ReportMetric(float64(rss)/(1<<10), "peak-RSS-MiB")
			}
		})
	}
}

// resetPeakRSS resets the kernel's high-water mark of this process's
// resident set (Linux 4.0+: writing 5 to clear_refs), so peakRSS measures
// the run and not the generation before it. Elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in KiB (0 when unknown).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

type bench struct {
	pool   *pgxpool.Pool
	lake   store.Store
	tenant uuid.UUID
}

// setupBench builds the tenant: one real promoted claim drained by the
// real lake writer (so the tables exist with the lake writer's schema),
// then n generated claims in the fold and in the lake.
func setupBench(b *testing.B, n, bodySize int) *bench {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	pool := testdb.New(b).Pool(b)
	k, err := keys.Generate()
	require.NoError(b, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(b, err)
	tn, _, err := tenant.Create(ctx, pool, k, "bench")
	require.NoError(b, err)
	lake := testkit.FileLake(b)

	body := []byte("real-body")
	sum := sha256.Sum256(body)
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: "real-1", Version: 1, WorkareaID: "wa", Writer: "w",
		Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:])},
		body, make([]byte, 32))
	require.NoError(b, err)
	_, err = chain.Append(ctx, pool, k, tn.ID, sub, journal.MustNew(journal.ClaimPromoted{ArtifactID: "real-1", Version: 1, By: "r"}))
	require.NoError(b, err)
	d, err := lakewriter.New(lakewriter.Options{DB: pool, Lake: lake, Signer: k, NoLease: true, HorizonTimeout: 20 * time.Second})
	require.NoError(b, err)
	_, err = d.DrainOnce(ctx)
	require.NoError(b, err)

	var head int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, tn.ID).Scan(&head))
	base := head + 1 // claim i: submitted at base+2i, promoted at base+2i+1
	last := base + 2*int64(n) - 1
	now := time.Now().UTC().Truncate(time.Microsecond)

	// The journal: 2n events, generated server-side (filler hashes, not a
	// chain: the database's chain check, migration 004, is off for them).
	_, err = pool.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER journal_extends_chain`)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT $1, s, sha256(('h' || (s - 1))::bytea), sha256(('h' || s)::bytea), decode(repeat('00', 64), 'hex'), $2::text,
       CASE WHEN (s - $3::bigint) % 2 = 0 THEN 'claim.submitted' ELSE 'claim.promoted' END,
       convert_to('{"n":' || s || '}', 'UTF8'), $4
  FROM generate_series($3::bigint, $5::bigint) s`, tn.ID, k.KeyID(), base, now, last)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `UPDATE oml.chain_heads SET seq = $2::bigint, hash = sha256(('h' || $2::bigint)::bytea) WHERE tenant_id = $1`, tn.ID, last)
	require.NoError(b, err)
	// The outbox: a bronze row per event and a materialize row per promotion.
	_, err = pool.Exec(ctx, `
INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
SELECT $1::uuid, s, t.target, t.op, t.artifact, t.version, '{}'::jsonb
  FROM generate_series($2::bigint, $3::bigint) s,
       LATERAL (VALUES ('bronze.events', 'append', NULL::text, NULL::int, 1),
                       ('silver.claims', 'materialize', 'art-' || lpad(((s - $2::bigint) / 2)::text, 8, '0'), 1, 2)) t(target, op, artifact, version, ord)
 WHERE t.ord = 1 OR ((s - $2::bigint) % 2 = 1 AND ((s - $2::bigint) / 2) % 10 <> 9)
 ORDER BY s, t.ord`, tn.ID, base, last)
	require.NoError(b, err)
	var frontier int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT max(seq) FROM oml.outbox`).Scan(&frontier))
	_, err = pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = $1, batch_end = $1`, frontier)
	require.NoError(b, err)

	// The claims (every tenth stays held) and their silver rows.
	claim := func(i int) (artifact string, pd, cd [32]byte, bodyBytes []byte, promoted bool) {
		artifact = fmt.Sprintf("art-%08d", i)
		pd = sha256.Sum256([]byte("plain-" + artifact))
		bodyBytes = make([]byte, bodySize)
		seed := sha256.Sum256([]byte(artifact))
		for j := 0; j < bodySize; j += 32 {
			copy(bodyBytes[j:], seed[:])
			binary.BigEndian.PutUint32(bodyBytes[j:], uint32(j))
		}
		cd = sha256.Sum256(bodyBytes)
		return artifact, pd, cd, bodyBytes, i%10 != 9
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"oml", "claims"},
		[]string{"tenant_id", "artifact_id", "version", "workarea_id", "writer", "principal", "provenance", "plaintext_digest",
			"ciphertext_digest", "state", "submitted_seq", "submitted_at", "promoted_by", "promoted_seq", "promoted_at", "updated_at", "last_seq"},
		pgx.CopyFromFunc(func() func() ([]any, error) {
			i := 0
			return func() ([]any, error) {
				if i >= n {
					return nil, nil
				}
				a, pd, cd, _, promoted := claim(i)
				sub := base + 2*int64(i)
				row := []any{tn.ID, a, int32(1), fmt.Sprintf("wa-%d", i%8), fmt.Sprintf("agent-%d", i%20), "principal-1", "human",
					pd[:], cd[:], "held", sub, now, nil, nil, nil, now, sub}
				if promoted {
					row[9], row[12], row[13], row[14], row[16] = "promoted", "reviewer-1", sub+1, now, sub+1
				}
				i++
				return row, nil
			}
		}()))
	require.NoError(b, err)

	perFile := *benchPerFile
	write := func(kind tables.Kind, fill func(emit func(pq.Row)) error) {
		st, err := tables.TableKey{Tenant: tn.ID, Kind: kind}.Store(lake)
		require.NoError(b, err)
		w, err := delta.OpenWriter(ctx, st, delta.Options{})
		require.NoError(b, err)
		var adds []*delta.Add
		var rows []pq.Row
		flush := func() {
			if len(rows) == 0 {
				return
			}
			add, err := w.WriteFile(ctx, map[string]*string{}, rows)
			require.NoError(b, err)
			adds = append(adds, add)
			rows = rows[:0]
		}
		require.NoError(b, fill(func(r pq.Row) {
			rows = append(rows, r)
			if len(rows) == perFile {
				flush()
			}
		}))
		flush()
		_, err = w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: adds, Txn: &delta.Txn{AppID: tables.AppID, Version: frontier}})
		require.NoError(b, err)
	}
	write(tables.Silver, func(emit func(pq.Row)) error {
		for i := 0; i < n; i++ {
			a, pd, cd, body, promoted := claim(i)
			if !promoted {
				continue
			}
			sub := base + 2*int64(i)
			emit(tables.SilverRow{ArtifactID: a, Version: 1, TenantID: tn.ID.String(), WorkareaID: fmt.Sprintf("wa-%d", i%8),
				Writer: fmt.Sprintf("agent-%d", i%20), Principal: "principal-1", Provenance: "human",
				PlaintextDigest: hex.EncodeToString(pd[:]), CiphertextDigest: hex.EncodeToString(cd[:]), Body: body, State: "promoted",
				PromotedBy: "reviewer-1", SubmittedSeq: sub, PromotedSeq: sub + 1, JournalSeq: sub + 1, OutboxSeq: frontier, UpdatedAt: now}.Row())
		}
		return nil
	})
	write(tables.Bronze, func(emit func(pq.Row)) error {
		rows, err := pool.Query(ctx, `SELECT seq, event_type, recorded_at, prev_hash, hash, signature, key_id, payload
FROM oml.journal WHERE tenant_id = $1 AND seq >= $2 ORDER BY seq`, tn.ID, base)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var et, kid string
			var at time.Time
			var prev, hash, sig, payload []byte
			if err := rows.Scan(&seq, &et, &at, &prev, &hash, &sig, &kid, &payload); err != nil {
				return err
			}
			emit(tables.BronzeRow{TenantID: tn.ID.String(), Seq: seq, EventType: et, RecordedAt: at.UTC(), PrevHash: prev, Hash: hash,
				Signature: sig, KeyID: kid, Payload: string(payload), OutboxSeq: frontier}.Row())
		}
		return rows.Err()
	})
	_, err = pool.Exec(ctx, `ANALYZE oml.claims; ANALYZE oml.journal; ANALYZE oml.outbox`)
	require.NoError(b, err)
	b.Logf("generated %d claims, %d journal events, outbox up to %d in %s", n, last, frontier, time.Since(start).Round(time.Second))
	b.ResetTimer()
	return &bench{pool: pool, lake: lake, tenant: tn.ID}
}

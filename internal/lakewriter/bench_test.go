package lakewriter_test

import (
	"bytes"
	"context"
	"flag"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

var (
	benchTenants   = flag.Int("bench.tenants", 100, "tenants in the drain benchmarks")
	benchClaims    = flag.Int("bench.claims", 40, "claims per tenant in the drain benchmarks")
	benchBacklog   = flag.Int("bench.backlog", 200000, "outbox rows in the backlog-memory benchmark (the issue's figure is 10000000)")
	benchLagFor    = flag.Duration("bench.lagfor", 10*time.Second, "how long the frontier-lag benchmark loads and drains")
	benchRate      = flag.Float64("bench.rate", 1000, "events/s the frontier-lag benchmark writes")
	benchLagN      = flag.Int("bench.lagtenants", 20, "tenants the frontier-lag benchmark writes to")
	benchLagLake   = flag.String("bench.lagstore", "file", "the frontier-lag benchmark's lake: file or s3 (versitygw)")
	benchMaxWait   = flag.Duration("bench.maxwait", 200*time.Millisecond, "the frontier-lag benchmark's --max-wait")
	benchLagStream = flag.String("bench.lagstream", "live", "the frontier-lag benchmark's load: live (the workload writes beside the writer) or pregenerated (written first through the same append path, then its outbox rows released at -bench.rate)")
	benchLagConc   = flag.Int("bench.lagconcurrency", 32, "tenants the frontier-lag benchmark's workload writes at once, each on its own connection of the application's pool (8, one pool with the writer's 4 connections, reached ~300 appends/s)")
	benchMergeRows = flag.Int64("bench.mergerows", 0, "the frontier-lag benchmark's Options.MergeRowsBytes (0: the default, a sixteenth of --memory's default)")
	benchLagPar    = flag.Int("bench.parallel", 0, "the frontier-lag benchmark's Options.Parallel (--parallel; 0: what suits the store)")
	benchLagTrace  = flag.String("bench.lagtrace", "", "write the frontier-lag benchmark's timeline to this file: each batch (its end, rows, tables, phases, the store's flush mode after it, GC cycles so far, the periodic fork checks ended so far and their time) and each lag sample, in seconds from the timed part's start")
	benchLagProf   = flag.String("bench.lagprofile", "", "write a CPU profile of the frontier-lag benchmark's timed part (the workload and the writer) to this file")
)

// benchBundle is a database with tenants and a loaded outbox, shared by the
// sub-benchmarks of one workload shape.
func benchSetup(b *testing.B, promote, retract float64) (*bundle, int64) {
	b.Helper()
	ctx := context.Background()
	d := testkit.NewDeployment(b, *benchTenants)
	bb := &bundle{Deployment: d, pool: d.Pool, key: d.Key, tenants: d.Tenants}
	pool, k := d.Pool, d.Key
	_, err := workload.Run(ctx, pool, k, workload.Config{Tenants: bb.tenants, Claims: *benchClaims, Seed: 99,
		PromoteRatio: promote, RetractRatio: retract, Batch: 20, Concurrency: 8})
	require.NoError(b, err)
	var rows int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox`).Scan(&rows))
	return bb, rows
}

// warmLoad adds a small first round of the same shape and returns the
// outbox seq it ends at: the drain benchmarks drain up to it untimed, so
// every table exists and the timed part is the steady state.
func warmLoad(b *testing.B, bb *bundle, promote, retract float64) int64 {
	b.Helper()
	return warmLoadOn(b, bb, bb.pool, 8, promote, retract)
}

// drainBenchOpts are the timed drains' options: room for the whole load in
// one batch, eight tables at a time, no fork check and no witness.
func drainBenchOpts(bb *bundle, lake store.Store) lakewriter.Options {
	o := bb.opts(lake)
	o.Limits = outbox.Limits{Rows: *benchClaims * *benchTenants * 4, Bytes: 256 << 20}
	o.Parallel = 8
	o.NoForkCheck, o.WitnessInterval = true, -1
	return o
}

// warmUp drains, with o, the untimed warm-up round up to outbox seq warm
// (see warmLoad), and returns the drainer that did.
func warmUp(b *testing.B, o lakewriter.Options, warm int64) *lakewriter.Drainer {
	b.Helper()
	o.StopAt = warm
	wd, err := lakewriter.New(o)
	require.NoError(b, err)
	_, err = wd.DrainOnce(context.Background())
	require.NoError(b, err)
	return wd
}

// sampleEvery calls fn every period on its own goroutine until the stop
// function it returns is called; stop returns once fn no longer runs.
func sampleEvery(period time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func resetFrontier(b *testing.B, bb *bundle) {
	b.Helper()
	_, err := bb.pool.Exec(context.Background(), `UPDATE oml.lake_frontier SET frontier = 0, batch_start = NULL, batch_end = NULL`)
	require.NoError(b, err)
}

func newLake(b *testing.B, kind string) store.Store {
	b.Helper()
	switch kind {
	case "file":
		url := "file://" + b.TempDir()
		if *benchFileSync != "" {
			url += "?sync=" + *benchFileSync // -bench.file-sync: the baseline's and BenchmarkFrontierLag's file lake
		}
		st, err := store.Open(context.Background(), url)
		require.NoError(b, err)
		return st
	default:
		return s3test.NewBucket(b, nil).Store
	}
}

// BenchmarkDrain measures the sustained drain rate (outbox rows/s) over
// many tenants for a bronze-heavy workload (no promotions: one bronze row
// per claim) and a mixed one (promotions with bodies, retracts as MERGEs),
// on the local store and on a real S3 server, next to the raw limit measured
// in the same run: the same outbox rows read with the same query and the
// same Parquet bytes written to the same store, with no Delta logic.
func BenchmarkDrain(b *testing.B) {
	for _, shape := range []struct {
		name             string
		promote, retract float64
	}{{"bronze-heavy", 0, 0}, {"mixed", 0.7, 0.3}} {
		b.Run(shape.name, func(b *testing.B) {
			bb, _ := benchSetupEmpty(b, *benchTenants)
			warm := warmLoad(b, bb, shape.promote, shape.retract)
			_, err := workload.Run(context.Background(), bb.pool, bb.key, workload.Config{Tenants: bb.tenants, Claims: *benchClaims,
				Seed: 99, PromoteRatio: shape.promote, RetractRatio: shape.retract, Batch: 20, Concurrency: 8})
			require.NoError(b, err)
			last := bb.lastSeq(b)
			for _, backend := range []string{"file", "s3"} {
				b.Run(backend+"/delta", func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						resetFrontier(b, bb)
						o := drainBenchOpts(bb, newLake(b, backend))
						// Untimed: the warm-up round creates every table.
						wd := warmUp(b, o, warm)
						require.GreaterOrEqual(b, wd.Frontier(), warm)
						d, err := lakewriter.New(o)
						require.NoError(b, err)
						b.StartTimer()
						start := time.Now()
						sum, err := d.DrainOnce(context.Background())
						require.NoError(b, err)
						el := time.Since(start)
						// Sustained rate: without the start-up recovery (reading
						// every table's log), which a long-running writer pays once.
						b.ReportMetric(float64(sum.Rows)/(el-sum.RecoverDuration).Seconds(), "rows/s")
						b.ReportMetric(float64(sum.Rows)/el.Seconds(), "rows/s_incl_startup")
						b.ReportMetric(float64(sum.TableCommits), "commits")
						b.ReportMetric(float64(sum.Rows), "rows")
					}
				})
				b.Run(backend+"/raw", func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						lake := newLake(b, backend)
						b.StartTimer()
						start := time.Now()
						n := rawDrain(b, bb, lake, warm, last)
						b.ReportMetric(float64(n)/time.Since(start).Seconds(), "rows/s")
					}
				})
			}
		})
	}
}

// rawDrain is the physical limit: read the outbox in the same batches with
// the same query and write each table's rows as one Parquet file per batch
// to the same store — no snapshot, no txn, no commit, no MERGE.
func rawDrain(b *testing.B, bb *bundle, lake store.Store, first, last int64) int {
	return rawExport(b, bb.pool, lake, first, last, int64(*benchClaims**benchTenants*4))
}

// rawExport is rawDrain over any database, in batches of step rows.
func rawExport(b *testing.B, pool *pgxpool.Pool, lake store.Store, first, last, step int64) int {
	b.Helper()
	ctx := context.Background()
	total := 0
	for from := first; from < last; from += step {
		to := min(from+step, last)
		groups, err := lakewriter.RawBatch(ctx, pool, from, to)
		require.NoError(b, err)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		var failed atomic.Value
		for key, rows := range groups {
			total += len(rows.Rows)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				var buf bytes.Buffer
				w, err := pq.NewWriter(&buf, rows.Schema, pq.Options{})
				if err == nil {
					err = w.Write(rows.Rows)
				}
				if err == nil {
					_, err = w.Close()
				}
				if err == nil {
					err = lake.Put(ctx, key+"/part-"+uuid.NewString()+".parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len()))
				}
				if err != nil {
					failed.Store(err)
				}
			}()
		}
		wg.Wait()
		if err, ok := failed.Load().(error); ok {
			b.Fatal(err)
		}
	}
	return total
}

// BenchmarkDrainBacklogMemory drains a large bronze backlog (inserted
// directly with SQL: generating it through the signed append path would
// take hours at 10 million rows) and reports the peak Go heap, which must
// stay flat in the backlog size: the writer streams batch by batch and never
// loads the backlog. Run with -bench.backlog=10000000 for the figure.
func BenchmarkDrainBacklogMemory(b *testing.B) {
	ctx := context.Background()
	db := testdb.New(b)
	pool := db.Pool(b)
	tenants := 100
	n := *benchBacklog
	// The backlog is synthetic, not a chain: the database's chain checks
	// (migration 004) would refuse it.
	_, err := pool.Exec(ctx, `ALTER TABLE oml.tenants DISABLE TRIGGER tenants_backed_by_event;
	                          ALTER TABLE oml.journal DISABLE TRIGGER journal_extends_chain`)
	require.NoError(b, err)
	// The rows must pass the lake writer's row check (check.go), so the
	// tenants are created by tenant.created events on a provider chain and
	// every journal row hashes to its stored hash (the envelope, computed in
	// SQL as chain.Envelope.Encode does); signatures are not checked there.
	_, err = pool.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT '00000000-0000-0000-0000-000000000000'::uuid, t, decode(repeat('00', 32), 'hex'),
       `+envelopeHashSQL("'00000000-0000-0000-0000-000000000000'::uuid", "t", "decode(repeat('00', 32), 'hex')", "'tenant.created'",
		"'2026-01-01Z'::timestamptz", "'bench'", "p")+`,
       decode(repeat('ab', 64), 'hex'), 'bench', 'tenant.created', p, '2026-01-01Z'
FROM generate_series(1, $1) t,
     LATERAL (SELECT convert_to('{"tenant_id":"' || ('00000000-0000-4000-8000-' || lpad(to_hex(t), 12, '0')) || '","name":"mem-' || t || '"}', 'UTF8') AS p) x`, tenants)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO oml.tenants (id, name, created_at, provider_seq, provider_hash)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(seq), 12, '0'))::uuid, 'mem-' || seq, now(), seq, hash
FROM oml.journal WHERE tenant_id = '00000000-0000-0000-0000-000000000000'`)
	if err != nil {
		b.Skipf("cannot bulk-insert tenants for the memory benchmark (schema changed?): %v", err)
	}
	_, err = pool.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT t, s, decode(repeat('00', 32), 'hex'),
       `+envelopeHashSQL("t", "s", "decode(repeat('00', 32), 'hex')", "'claim.submitted'", "'2026-01-01Z'::timestamptz", "'bench'", "p")+`,
       decode(repeat('ab', 64), 'hex'), 'bench', 'claim.submitted', p, '2026-01-01Z'
FROM generate_series(0, $1 - 1) g,
     LATERAL (SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(1 + (g % $2)), 12, '0'))::uuid AS t, (1 + g / $2)::bigint AS s,
                     convert_to(repeat('x', 200), 'UTF8') AS p) x`, n, tenants)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload)
SELECT tenant_id, seq, 'bronze.events', 'append', '{"event_type":"claim.submitted"}'
FROM oml.journal WHERE tenant_id <> '00000000-0000-0000-0000-000000000000' ORDER BY seq, tenant_id`)
	require.NoError(b, err)

	for i := 0; i < b.N; i++ {
		_, err := pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = 0`)
		require.NoError(b, err)
		lake := newLake(b, "file")
		d, err := lakewriter.New(lakewriter.Options{DB: pool, Lake: lake, NoLease: true, Parallel: 8,
			Limits: outbox.Limits{Rows: 10000, Bytes: 64 << 20}, HorizonTimeout: time.Minute})
		require.NoError(b, err)
		var peak atomic.Uint64
		var ms runtime.MemStats
		stop := sampleEvery(20*time.Millisecond, func() {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		})
		start := time.Now()
		sum, err := d.DrainOnce(ctx)
		stop()
		require.NoError(b, err)
		b.ReportMetric(float64(sum.Rows)/time.Since(start).Seconds(), "rows/s")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak_heap_MiB")
		b.ReportMetric(float64(n), "backlog_rows")
	}
}

// BenchmarkFrontierLag runs the long-running writer while the workload
// writes at a steady -bench.rate over -bench.lagtenants tenants for
// -bench.lagfor and samples the frontier lag (age of the oldest row not yet
// in the lake) every 100 ms. Every table exists before the timed part (one
// untimed round per tenant), as in a running deployment.
func BenchmarkFrontierLag(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bb, _ := benchSetupEmpty(b, *benchLagN)
		// The application writes on its own pool, one connection per
		// writer, as it would in its own process: on the writer's pool (4
		// connections) the workload's appends and the writer's queries
		// queued behind each other, and 8 writers reached ~400 events/s.
		app := appPool(b, bb, *benchLagConc)
		lake := newLake(b, *benchLagLake)
		o := bb.opts(lake)
		o.MaxWait = *benchMaxWait
		o.Poll = 50 * time.Millisecond
		o.Limits = outbox.Limits{Rows: 10000, Bytes: 64 << 20}
		o.MergeRowsBytes = *benchMergeRows
		o.Parallel = *benchLagPar
		var commits atomic.Int64
		var trace batchTrace
		// perFile counts the batches after which a sync=auto file lake
		// flushes per file (its fallback from rounds, autosync.go). Asking
		// (SyncInEffect) can start a retry of rounds, but only
		// autoBackoffMax after a fallback, later than the drainer's own
		// sizing of its next batch retries them.
		var perFile atomic.Int64
		fileLake, _ := lake.(*store.File)
		var timeline lagTimeline
		// running is the writer once the warm-up has made it (OnBatch runs
		// in the warm-up too), for the fork checks it has ended so far.
		var running atomic.Pointer[lakewriter.Drainer]
		o.OnBatch = func(r lakewriter.BatchResult) {
			commits.Add(int64(r.Tables))
			trace.add(r)
			mode := "rounds"
			if fileLake != nil && fileLake.SyncInEffect() == store.SyncPerFile {
				perFile.Add(1)
				mode = "per-file"
			}
			var checks int64
			var checked time.Duration
			if w := running.Load(); w != nil {
				checks, checked = w.ForkCheckReads()
			}
			timeline.batch(r, mode, checks, checked)
		}
		// Steady state: the writer that drained the warm-up (every table
		// exists, its start-up scan is done) goes on running, so the lag
		// measured is the steady state's, not the start-up scan of every
		// table's log.
		var d *lakewriter.Drainer
		if *benchLagN > 20 {
			d = warmUp(b, o, warmLoadOn(b, bb, app, *benchLagConc, 0.7, 0.2))
		} else {
			var err error
			d, err = lakewriter.New(o)
			require.NoError(b, err)
		}
		running.Store(d)
		var stream stagedStream
		if *benchLagStream == "pregenerated" {
			stream = stageStream(b, bb, app, *benchLagConc, int64(*benchRate*benchLagFor.Seconds()), d.Frontier())
		}
		commits.Store(0)
		perFile.Store(0)
		trace.reset()
		timeline.start()
		pool0 := bb.pool.Stat()
		ctx, cancel := context.WithCancel(context.Background())
		stopProfile := profileTo(b, *benchLagProf)
		pg0, cpu0 := backendCPU(ctx, app, bb.DB.Name), processCPU()
		ticks0, idle0 := machineTicks()
		vacuums0 := autovacuums(ctx, app)
		hits0, misses0 := lakewriter.MergeRowsHits(d)
		_, byKind0 := lakewriter.MergeRowsByKind(d)
		gc0 := gcCycles()
		logOpens0, stateOpens0 := d.TableOpens()
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()

		// The lag is the age of the oldest outbox row past the frontier.
		// It is among the first rows past it: created_at is its
		// transaction's start, and only transactions in flight together
		// (a few rows each, Concurrency of them) take their seqs out of
		// that order. A min over every row past the frontier read the
		// whole backlog ten times a second, a cost on the database that
		// grew with the very lag it measured (5 ms a read at 40,000 rows
		// behind, 0.05 of a core; 0.4 ms for the first 1,000 rows).
		var lags []float64
		stopSampling := sampleEvery(100*time.Millisecond, func() {
			var lag float64
			_ = app.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)
FROM (SELECT created_at FROM oml.outbox WHERE seq > $1 ORDER BY seq LIMIT 1000) head`, d.Frontier()).Scan(&lag)
			lags = append(lags, lag)
			timeline.lag(lag)
		})
		// With a timeline, what PostgreSQL's autovacuum workers are doing
		// every half second (they share the machine's two cores).
		stopVacuums := func() {}
		if *benchLagTrace != "" {
			stopVacuums = sampleEvery(500*time.Millisecond, func() {
				var vacuuming string
				_ = app.QueryRow(ctx, `SELECT coalesce(string_agg(query, '; '), '')
FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND query <> ''`).Scan(&vacuuming)
				if vacuuming != "" {
					timeline.add("autovacuum " + vacuuming)
				}
			})
		}
		var events int64
		var elapsed time.Duration
		if *benchLagStream == "pregenerated" {
			var err error
			events, elapsed, err = releaseStream(ctx, app, stream, *benchRate)
			require.NoError(b, err)
		} else {
			res, err := workload.Run(ctx, app, bb.key, workload.Config{Tenants: bb.tenants, Claims: 5, Seed: 5,
				PromoteRatio: 0.7, RetractRatio: 0.2, Rate: *benchRate, Duration: *benchLagFor, Concurrency: *benchLagConc})
			require.NoError(b, err)
			events, elapsed = res.Stats.Events, time.Duration(res.Stats.ElapsedNano)
		}
		stopSampling()
		stopVacuums()
		stopProfile()
		pgCPU, cpu := cpuSince(pg0, backendCPU(context.Background(), app, bb.DB.Name)), processCPU()-cpu0
		busy, vacuums := busySince(ticks0, idle0), autovacuums(context.Background(), app)-vacuums0
		cancel()
		require.NoError(b, <-done)
		el := elapsed.Seconds()
		// CPU in cores: this process (the workload and the writer) and the
		// database's backends (both pools').
		b.ReportMetric(cpu.Seconds()/el, "proc_cores")
		b.ReportMetric(pgCPU.Seconds()/el, "pg_cores")
		// The whole machine's (pg_cores counts only the backends connected
		// at both ends of the run, not an autovacuum worker that came and
		// went), and the autovacuum and autoanalyze runs in the minute.
		b.ReportMetric(busy, "machine_busy")
		b.ReportMetric(float64(vacuums), "autovacuums")
		trace.report(b)
		timeline.write(b, *benchLagTrace)
		b.ReportMetric(float64(perFile.Load()), "perfile_batches")
		// How the tables the batches touched were opened: rebuilt from
		// their compact states, or read from their logs (registry.go),
		// and the MERGE tables' states kept at the end.
		logOpens, stateOpens := d.TableOpens()
		b.ReportMetric(float64(logOpens-logOpens0)/el, "log_opens/s")
		b.ReportMetric(float64(stateOpens-stateOpens0)/el, "state_opens/s")
		if n, bytes := d.MergeStates(); n > 0 {
			b.ReportMetric(float64(n), "merge_states")
			b.ReportMetric(float64(bytes)/float64(n), "merge_state_bytes")
		}
		// How often a MERGE found the rows of the file it rewrites in
		// memory (mergerows.go) in the timed part.
		if hits, misses := lakewriter.MergeRowsHits(d); hits+misses > hits0+misses0 {
			b.ReportMetric(float64(hits-hits0)/float64(hits+misses-hits0-misses0), "merge_rows_hit_ratio")
		}
		// By table: the hit ratio in the timed part, and the files and
		// their estimated MiB the cache holds at the end.
		kept, byKind := lakewriter.MergeRowsByKind(d)
		for _, kind := range tables.Kinds {
			name := strings.ReplaceAll(string(kind), "/", "_")
			if h, m := byKind[kind][0]-byKind0[kind][0], byKind[kind][1]-byKind0[kind][1]; h+m > 0 {
				b.ReportMetric(float64(h)/float64(h+m), "merge_rows_hit_ratio_"+name)
			}
			if k, ok := kept[kind]; ok {
				b.ReportMetric(float64(k[0]), "merge_rows_files_"+name)
				b.ReportMetric(float64(k[1])/(1<<20), "merge_rows_MiB_"+name)
			}
		}
		// The collector's cycles a second in the timed part.
		b.ReportMetric(float64(gcCycles()-gc0)/el, "gc/s")
		sort.Float64s(lags)
		if len(lags) > 0 {
			b.ReportMetric(lags[len(lags)/2], "lag_p50_s")
			b.ReportMetric(lags[len(lags)*99/100], "lag_p99_s")
			b.ReportMetric(lags[len(lags)-1], "lag_max_s")
		}
		b.ReportMetric(float64(events)/el, "load_events/s")
		if *benchLagStream == "pregenerated" {
			// The workload's own rate, writing the stream with the writer idle.
			b.ReportMetric(stream.genRate, "gen_events/s")
		}
		b.ReportMetric(float64(commits.Load())/el, "table_commits/s")
		// Whether the writer's pool queues: the time its acquires waited
		// for a connection, per second of the run.
		pool1 := bb.pool.Stat()
		b.ReportMetric((pool1.AcquireDuration()-pool0.AcquireDuration()).Seconds()/el, "pool_wait_s/s")
		b.ReportMetric(float64(pool1.EmptyAcquireCount()-pool0.EmptyAcquireCount()), "pool_empty_acquires")
		if n, took := d.ForkCheckReads(); n > 0 {
			b.ReportMetric(took.Seconds()/float64(n), "fork_check_s")
		}
	}
}

// appPool is the application's pool on bb's database: conns connections
// (plus one for the lag sampler), apart from the writer's.
func appPool(b *testing.B, bb *bundle, conns int) *pgxpool.Pool {
	b.Helper()
	return bb.DB.PoolSized(b, int32(conns+1))
}

// warmLoadOn is warmLoad written on pool by conc writers.
func warmLoadOn(b *testing.B, bb *bundle, pool *pgxpool.Pool, conc int, promote, retract float64) int64 {
	b.Helper()
	_, err := workload.Run(context.Background(), pool, bb.key, workload.Config{Tenants: bb.tenants, Claims: 3, Seed: 98,
		PromoteRatio: max(promote, 0.99), RetractRatio: max(retract, 0.5), Batch: 3, Concurrency: conc})
	require.NoError(b, err)
	return bb.lastSeq(b)
}

func benchSetupEmpty(b *testing.B, tenants int) (*bundle, int64) {
	b.Helper()
	old := *benchTenants
	*benchTenants = tenants
	defer func() { *benchTenants = old }()
	oldC := *benchClaims
	*benchClaims = 0
	defer func() { *benchClaims = oldC }()
	return benchSetup(b, 0, 0)
}

// envelopeHashSQL is a SQL expression for the event hash of the given
// columns: SHA-256 of the v1 envelope (docs/journal-envelope.md).
func envelopeHashSQL(tenant, seq, prev, typ, at, keyID, payload string) string {
	return `sha256('OMLJ'::bytea || '\x01'::bytea || uuid_send(` + tenant + `) || int8send(` + seq + `) || ` + prev +
		` || int2send(octet_length(` + typ + `)::int2) || convert_to(` + typ + `, 'UTF8')` +
		` || int8send((extract(epoch FROM ` + at + `) * 1000000)::bigint)` +
		` || int2send(octet_length(` + keyID + `)::int2) || convert_to(` + keyID + `, 'UTF8') || sha256(` + payload + `))`
}

// gcCycles is the collector's cycles so far.
func gcCycles() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

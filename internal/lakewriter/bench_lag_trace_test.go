package lakewriter_test

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// lagTimeline is the frontier-lag benchmark's timeline (-bench.lagtrace):
// when each batch ended and what it did, and each lag sample, so a lag
// run's worst seconds can be matched with what the writer did then.
type lagTimeline struct {
	mu    sync.Mutex
	t0    time.Time
	lines []string
}

func (l *lagTimeline) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t0, l.lines = time.Now(), nil
}

func (l *lagTimeline) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.t0.IsZero() {
		l.lines = append(l.lines, strconv.FormatFloat(time.Since(l.t0).Seconds(), 'f', 3, 64)+" "+line)
	}
}

func (l *lagTimeline) batch(r lakewriter.BatchResult, mode string, forkChecks int64, forkChecked time.Duration) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	p := r.Phases
	l.add(fmt.Sprintf("batch rows=%d tables=%d read=%.3f ahead_wait=%.3f apply=%.3f from_ahead=%v flush=%s gc_cycles=%d fork_checks=%d fork_check_s=%.2f",
		r.Rows, r.Tables, p.Read.Seconds(), p.AheadWait.Seconds(), p.Apply.Seconds(), p.FromAhead, mode, s[0].Value.Uint64(),
		forkChecks, forkChecked.Seconds()))
}

func (l *lagTimeline) lag(v float64) { l.add("lag " + strconv.FormatFloat(v, 'f', 3, 64)) }

// write puts the timeline in path ("": nowhere).
func (l *lagTimeline) write(b *testing.B, path string) {
	if path == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NoError(b, os.WriteFile(path, []byte(strings.Join(l.lines, "\n")+"\n"), 0o644))
}

// batchTrace sums where the frontier-lag benchmark's batches spent their
// time (lakewriter.BatchPhases) and the loop's time between two batches
// (the fence, the horizon, the cut and the pending probes, the waits).
type batchTrace struct {
	mu                   sync.Mutex
	batches, fromAhead   int
	rows, tables         int
	sum                  lakewriter.BatchPhases
	between              time.Duration
	last                 time.Time
	maxBatch, maxBetween time.Duration
}

func (t *batchTrace) add(r lakewriter.BatchResult) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := r.Phases
	took := p.Check + p.AheadWait + p.Read + p.Apply + p.Frontier
	if !t.last.IsZero() {
		gap := max(0, now.Sub(t.last)-took)
		t.between += gap
		t.maxBetween = max(t.maxBetween, gap)
	}
	t.last = now
	t.batches++
	if p.FromAhead {
		t.fromAhead++
	}
	t.rows += r.Rows
	t.tables += r.Tables
	t.sum.Check += p.Check
	t.sum.AheadWait += p.AheadWait
	t.sum.Read += p.Read
	t.sum.Apply += p.Apply
	t.sum.Frontier += p.Frontier
	t.maxBatch = max(t.maxBatch, took)
}

func (t *batchTrace) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.batches, t.fromAhead, t.rows, t.tables = 0, 0, 0, 0
	t.sum, t.between, t.last, t.maxBatch, t.maxBetween = lakewriter.BatchPhases{}, 0, time.Time{}, 0, 0
}

// report adds the trace's means per batch to b's metrics.
func (t *batchTrace) report(b *testing.B) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b.ReportMetric(float64(t.batches), "batches")
	if t.batches == 0 {
		return
	}
	n := float64(t.batches)
	b.ReportMetric(float64(t.rows)/n, "rows/batch")
	b.ReportMetric(float64(t.tables)/n, "tables/batch")
	b.ReportMetric(float64(t.fromAhead)/n, "read_ahead_used")
	b.ReportMetric(t.sum.Check.Seconds()/n, "check_s/batch")
	b.ReportMetric(t.sum.AheadWait.Seconds()/n, "ahead_wait_s/batch")
	b.ReportMetric(t.sum.Read.Seconds()/n, "read_s/batch")
	b.ReportMetric(t.sum.Apply.Seconds()/n, "apply_s/batch")
	b.ReportMetric(t.sum.Frontier.Seconds()/n, "frontier_s/batch")
	b.ReportMetric(t.between.Seconds()/n, "between_s/batch")
	b.ReportMetric(t.maxBatch.Seconds(), "batch_max_s")
	b.ReportMetric(t.maxBetween.Seconds(), "between_max_s")
}

// backendCPU is the CPU time (user + system) the PostgreSQL backends of
// database name have used so far, by pid, read from /proc (Linux; the
// server runs on this machine). A backend that ended is not counted.
func backendCPU(ctx context.Context, pool *pgxpool.Pool, name string) map[int]time.Duration {
	out := map[int]time.Duration{}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, name)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			continue
		}
		if d, ok := procCPU(pid); ok {
			out[pid] = d
		}
	}
	return out
}

// procCPU reads a process's utime + stime from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * (time.Second / 100), true // USER_HZ is 100 on Linux
}

// cpuSince is the CPU the backends in after used since before (a backend
// new in after counts whole).
func cpuSince(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, a := range after {
		d += a - before[pid]
	}
	return d
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A pre-generated stream (-bench.lagstream pregenerated). On this 2-core
// machine the workload's append path (signing, the chain's advisory lock,
// the fold, PostgreSQL's work for it) competes with the writer for the
// same cores, and does not reach 2,000 events/s beside it. So the stream
// is written first, through the real append path and with the writer
// idle, as fast as the workload goes: the journal, the fold and the held
// bodies stay, and the outbox rows past the warm-up are moved aside into
// a staging table. The timed part then puts them back into oml.outbox in
// their original order, every 10 ms the rows of the events due by then
// at -bench.rate events/s (each INSERT takes its own xid, seq and
// created_at, as an append does; the outbox's own trigger checks each
// row's journal event). The writer sees the same rows, tenants and
// interleaving the workload wrote, at the rate asked for; what it does
// not compete with is the application's append path.

// stagedStream is the outbox rows of a pre-generated stream, moved aside.
type stagedStream struct {
	events int64 // journal events the rows come from
	rows   int64
	// genRate is the events/s the workload reached writing the stream
	// with the writer idle (its own rate on this machine).
	genRate float64
}

// stageStream writes about events journal events through the workload on
// app, with the writer idle, and moves their outbox rows (past seq after)
// into lag_stream, numbered by event in seq order.
func stageStream(b *testing.B, bb *bundle, app *pgxpool.Pool, conc int, events int64, after int64) stagedStream {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := workload.Run(ctx, app, bb.key, workload.Config{Tenants: bb.tenants, Claims: 5, Seed: 5,
		PromoteRatio: 0.7, RetractRatio: 0.2, Duration: time.Hour, Concurrency: conc,
		Progress: func(s workload.Stats) {
			if s.Events >= events {
				cancel()
			}
		}})
	require.NoError(b, err)
	bg := context.Background()
	_, err = bb.pool.Exec(bg, `
CREATE UNLOGGED TABLE lag_stream AS
SELECT dense_rank() OVER (ORDER BY ev_first, tenant_id, journal_seq) AS ev, seq AS orig_seq,
       tenant_id, journal_seq, target, op, artifact_id, version, payload
  FROM (SELECT o.*, min(seq) OVER (PARTITION BY tenant_id, journal_seq) AS ev_first
          FROM oml.outbox o WHERE seq > $1) x`, after)
	require.NoError(b, err)
	_, err = bb.pool.Exec(bg, `CREATE INDEX ON lag_stream (ev, orig_seq)`)
	require.NoError(b, err)
	_, err = bb.pool.Exec(bg, `DELETE FROM oml.outbox WHERE seq > $1`, after)
	require.NoError(b, err)
	var st stagedStream
	require.NoError(b, bb.pool.QueryRow(bg, `SELECT coalesce(max(ev), 0), count(*) FROM lag_stream`).Scan(&st.events, &st.rows))
	st.genRate = float64(res.Stats.Events) / time.Duration(res.Stats.ElapsedNano).Seconds()
	return st
}

// releaseStream puts the staged rows back into oml.outbox at rate events/s,
// in their original order, until all are in or ctx ends; it returns the
// events released and how long it took.
func releaseStream(ctx context.Context, pool *pgxpool.Pool, st stagedStream, rate float64) (int64, time.Duration, error) {
	start := time.Now()
	var released int64
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for released < st.events {
		select {
		case <-ctx.Done():
			return released, time.Since(start), nil
		case <-t.C:
		}
		due := min(st.events, int64(time.Since(start).Seconds()*rate))
		if due <= released {
			continue
		}
		_, err := pool.Exec(ctx, `
INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload
  FROM lag_stream WHERE ev > $1 AND ev <= $2 ORDER BY ev, orig_seq`, released, due)
		if err != nil {
			return released, time.Since(start), err
		}
		released = due
	}
	return released, time.Since(start), nil
}

// profileTo starts a CPU profile into path (none when path is empty) and
// returns what stops it.
func profileTo(b *testing.B, path string) (stop func()) {
	b.Helper()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	require.NoError(b, err)
	require.NoError(b, pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		require.NoError(b, f.Close())
	}
}

// machineTicks reads the machine's CPU time from /proc/stat: all of it
// and the idle part (idle and iowait), in clock ticks.
func machineTicks() (total, idle float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total, idle
}

// busySince is the share of the machine's CPU time that was not idle
// since machineTicks gave total0 and idle0: the writer, the workload,
// PostgreSQL (its autovacuum workers too) and the kernel's own threads.
func busySince(total0, idle0 float64) float64 {
	total, idle := machineTicks()
	if total <= total0 {
		return 0
	}
	return 1 - (idle-idle0)/(total-total0)
}

// autovacuums counts the autovacuum and autoanalyze runs PostgreSQL has
// recorded for the database's tables so far.
func autovacuums(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	_ = pool.QueryRow(ctx, `SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables`).Scan(&n)
	return n
}

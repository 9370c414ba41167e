package chain_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

// BenchmarkAppend measures events/s through the real append path with 8
// concurrent writers, for 1 and 16 tenants, one event per transaction and
// batches of 100. Each event is a claim.submitted with a 256-byte body.
//
// The throwaway test cluster runs with fsync off, so by default this
// measures the CPU and round-trip cost; to include the commit flush (the
// per-tenant ceiling), point OML_TEST_DATABASE_URL at a server with fsync on.
func BenchmarkAppend(b *testing.B) {
	// Reference: one writer, one tenant, one event per commit (latency-bound).
	b.Run("tenants=1/writers=1/batch=1", func(b *testing.B) { benchAppend(b, 1, 1, 1) })
	b.Run("tenants=1/writers=1/batch=100", func(b *testing.B) { benchAppend(b, 1, 1, 100) })
	for _, tenants := range []int{1, 16} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("tenants=%d/writers=8/batch=%d", tenants, batch), func(b *testing.B) {
				benchAppend(b, tenants, 8, batch)
			})
		}
	}
}

// BenchmarkAppendEnforcement puts the append path with the database's
// enforcement (migration 004: oml.append_journal's checks, the
// journal_extends_chain and outbox_names_journal_event triggers; the
// trust_copies_and_event_rights migration: append_journal's event types by
// role, the outbox_implied_once index and the copy trigger) next to two
// paths without it, in one run:
//
//   - "unenforced": the same Go code and the same one statement, checks
//     left out: the triggers and the index dropped and append_journal
//     replaced by the plain writes (the journal rows, the outbox rows it is
//     given: append_writes_its_outbox, and the head update) in one
//     statement as the enforced fast path makes them (append_fast_path).
//     cost-% and cpu-cost-% compare with this side: the checks alone.
//   - "before12": the append as it was before issue 12 (AppendBeforeTrust:
//     the head read from oml.chain_heads, the journal INSERT, the head
//     UPDATE and the outbox INSERT sent by the application itself), on the
//     same schema with the triggers and the index dropped and the
//     application's INSERT/UPDATE grants back. cost-vs-before12-% and
//     cpu-cost-vs-before12-% compare with this side: enforced vs the path
//     as it was.
//
// Every side appends as the application (the pool's sessions SET ROLE
// oml_app, so row-level security and the role checks run as in
// production). The sides run on three databases of one cluster in rounds
// of about 200 events, one side at a time, the order rotated every round,
// so all see the same load on a shared machine; each side appends b.N
// events. Each run logs its figures and the median of every run so far of
// the same case (-count N: the last line has the median of all N).
//
//	go test -run '^$' -bench 'BenchmarkAppendEnforcement/tenants=16' -benchtime 6000x -count 5 ./internal/chain/
func BenchmarkAppendEnforcement(b *testing.B) {
	cases := []struct{ tenants, writers, batch int }{{1, 1, 1}, {1, 1, 100}, {16, 8, 1}, {16, 8, 100}}
	for _, c := range cases {
		b.Run(fmt.Sprintf("tenants=%d/writers=%d/batch=%d", c.tenants, c.writers, c.batch), func(b *testing.B) {
			sides := []*benchSide{
				{name: "enforced", env: newBenchEnv(b, c.tenants, c.writers, c.batch, sideEnforced)},
				{name: "unenforced", env: newBenchEnv(b, c.tenants, c.writers, c.batch, sideUnenforced)},
				{name: "before12", env: newBenchEnv(b, c.tenants, c.writers, c.batch, sideBefore12)},
			}
			appends := (b.N + c.batch - 1) / c.batch
			chunk := max(1, 200/c.batch)
			// One round each before the clock starts, so every pool
			// connection (and its server backend) exists when the
			// backends' CPU is first read.
			for _, s := range sides {
				s.env.run(b, chunk)
			}
			sides[0].env.appended.Store(0)
			for _, s := range sides {
				s.meter.start(b, s.env)
			}
			b.ResetTimer()
			for round := 0; appends > 0; round++ {
				n := min(chunk, appends)
				appends -= n
				for i := range sides {
					s := sides[(round+i)%len(sides)]
					s.elapsed += s.meter.run(b, s.env, n)
				}
			}
			b.StopTimer()
			events := float64(sides[0].env.appended.Load() * int64(c.batch))
			r := enforcementRun{n: b.N}
			for _, s := range sides {
				s.events = events
				b.ReportMetric(events/s.elapsed.Seconds(), s.name+"-events/s")
			}
			e, u, p := sides[0], sides[1], sides[2]
			r.cost, r.costBefore12 = 100*(1-u.elapsed.Seconds()/e.elapsed.Seconds()), 100*(1-p.elapsed.Seconds()/e.elapsed.Seconds())
			b.ReportMetric(r.cost, "cost-%")
			b.ReportMetric(r.costBefore12, "cost-vs-before12-%")
			// The same comparisons in CPU time per event (this process's,
			// which runs one side at a time, plus the side's server
			// backends'), and each part of it: on a machine shared with
			// other work, wall-clock throughput moves with everyone's load,
			// CPU per event much less. Left out when the backends' CPU
			// cannot be read (a server on another host).
			ok := true
			for _, s := range sides {
				ok = s.meter.total(b, s.env) && ok
			}
			if ok {
				for _, s := range sides {
					b.ReportMetric(s.meter.client.Seconds()*1e6/events, s.name+"-client-cpu-µs/event")
					b.ReportMetric(s.meter.server.Seconds()*1e6/events, s.name+"-server-cpu-µs/event")
				}
				r.cpu = true
				r.cpuCost = 100 * (1 - u.meter.cpu().Seconds()/e.meter.cpu().Seconds())
				r.cpuCostBefore12 = 100 * (1 - p.meter.cpu().Seconds()/e.meter.cpu().Seconds())
				b.ReportMetric(r.cpuCost, "cpu-cost-%")
				b.ReportMetric(r.cpuCostBefore12, "cpu-cost-vs-before12-%")
			}
			logEnforcementRun(b, r)
		})
	}
}

// benchSide is one side of BenchmarkAppendEnforcement: its deployment, its
// CPU meter and its wall-clock time over the timed rounds.
type benchSide struct {
	name    string
	env     *benchEnv
	meter   cpuMeter
	elapsed time.Duration
	events  float64
}

// enforcementRun is one run's figures (cost: enforced vs unenforced, the
// checks alone; costBefore12: enforced vs the path before issue 12).
type enforcementRun struct {
	n                        int
	cost, costBefore12       float64
	cpu                      bool
	cpuCost, cpuCostBefore12 float64
}

// enforcementRuns holds every run of each case (by name and b.N) in this
// process, so that the last of -count N runs can print their median.
var enforcementRuns = map[string][]enforcementRun{}

func logEnforcementRun(b *testing.B, r enforcementRun) {
	if r.n == 1 {
		return // the framework's first run, before the b.N asked for
	}
	key := fmt.Sprintf("%s/N=%d", b.Name(), r.n)
	runs := append(enforcementRuns[key], r)
	enforcementRuns[key] = runs
	if r.cpu {
		b.Logf("run %d: cost-%% %.1f cpu-cost-%% %.1f cost-vs-before12-%% %.1f cpu-cost-vs-before12-%% %.1f",
			len(runs), r.cost, r.cpuCost, r.costBefore12, r.cpuCostBefore12)
	} else {
		b.Logf("run %d: cost-%% %.1f cost-vs-before12-%% %.1f", len(runs), r.cost, r.costBefore12)
	}
	if len(runs) < 2 {
		return
	}
	pick := func(f func(enforcementRun) float64) string {
		v := make([]float64, 0, len(runs))
		for _, r := range runs {
			v = append(v, f(r))
		}
		sort.Float64s(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
		}
		return fmt.Sprintf("%.1f (%s)", med, strings.Join(parts, ", "))
	}
	b.Logf("median of %d runs (sorted values): cost-%% %s", len(runs), pick(func(r enforcementRun) float64 { return r.cost }))
	b.Logf("median of %d runs (sorted values): cost-vs-before12-%% %s", len(runs), pick(func(r enforcementRun) float64 { return r.costBefore12 }))
	if r.cpu {
		b.Logf("median of %d runs (sorted values): cpu-cost-%% %s", len(runs), pick(func(r enforcementRun) float64 { return r.cpuCost }))
		b.Logf("median of %d runs (sorted values): cpu-cost-vs-before12-%% %s", len(runs), pick(func(r enforcementRun) float64 { return r.cpuCostBefore12 }))
	}
}

func benchAppend(b *testing.B, tenants, writers, batch int) {
	env := newBenchEnv(b, tenants, writers, batch, sideEnforced)
	appends := (b.N + batch - 1) / batch
	b.ResetTimer()
	elapsed := env.run(b, appends)
	b.StopTimer()
	b.ReportMetric(float64(appends*batch)/elapsed.Seconds(), "events/s")
}

// cpuMeter adds up the CPU time one side of a comparison uses: this
// process's during that side's rounds (the sides run one at a time), and
// the side's server backends' (one database each) from start to total.
type cpuMeter struct {
	client   time.Duration
	server   time.Duration           // set by total
	backends map[int32]time.Duration // at start, by pid
}

func (m *cpuMeter) start(b *testing.B, env *benchEnv) {
	m.backends, _ = backendCPU(b, env)
}

func (m *cpuMeter) run(b *testing.B, env *benchEnv, n int) time.Duration {
	before := processCPU(b)
	d := env.run(b, n)
	m.client += processCPU(b) - before
	return d
}

// total sets m.server to the side's backends' CPU time since start;
// false when the backends' CPU cannot be read.
func (m *cpuMeter) total(b *testing.B, env *benchEnv) bool {
	now, ok := backendCPU(b, env)
	if !ok || m.backends == nil {
		return false
	}
	m.server = 0
	for pid, c := range now {
		m.server += c - m.backends[pid]
	}
	return true
}

// cpu is the side's whole CPU time (after total).
func (m *cpuMeter) cpu() time.Duration { return m.client + m.server }

// processCPU is this process's user+system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU is the user+system CPU time of each client backend of env's
// database, by pid, from /proc (ok=false when a backend's is unreadable:
// the server is not on this host, or not on Linux).
func backendCPU(b *testing.B, env *benchEnv) (map[int32]time.Duration, bool) {
	rows, err := env.owner.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	require.NoError(b, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(b, err)
	out := make(map[int32]time.Duration, len(pids))
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, false
		}
		// Fields after the command (which is in parentheses and may hold
		// spaces): state is field 3, utime 14, stime 15, in clock ticks
		// (USER_HZ, 100 on Linux).
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 13 {
			return nil, false
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out[pid] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out, true
}

// benchEnv is an initialised deployment with tenants to append to.
type benchEnv struct {
	owner           *pgxpool.Pool
	pool            *pgxpool.Pool
	key             *keys.Key
	ids             []uuid.UUID
	writers, batch  int
	append          func(context.Context, *pgxpool.Pool, chain.Signer, uuid.UUID, ...journal.Event) ([]chain.Record, error)
	artifact, turns atomic.Int64
	appended        atomic.Int64
}

// benchSchema is what a benchEnv's database enforces.
type benchSchema int

const (
	sideEnforced   benchSchema = iota // the schema as migrated
	sideUnenforced                    // the checks dropped, the same statements
	sideBefore12                      // the checks dropped, the grants and the append path before issue 12
)

// dropChecks drops what the enforcement adds to an append's writes (the
// chain trigger, the outbox triggers, the outbox_implied_once index) and
// gives the application back the INSERT/UPDATE grants 004 revoked.
const dropChecks = `DROP TRIGGER journal_extends_chain ON oml.journal;
	DROP TRIGGER outbox_names_journal_event ON oml.outbox;
	DROP TRIGGER outbox_copy_names_dead_letter ON oml.outbox;
	DROP INDEX oml.outbox_implied_once;
	GRANT INSERT ON oml.journal, oml.outbox TO oml_app;
	GRANT INSERT, UPDATE ON oml.chain_heads TO oml_app;`

func newBenchEnv(b *testing.B, tenants, writers, batch int, schema benchSchema) *benchEnv {
	ctx := context.Background()
	db := testdb.New(b)
	owner, err := pgconn.Open(ctx, db.URL, pgconn.Options{MaxConns: 2})
	require.NoError(b, err)
	b.Cleanup(owner.Close)
	k, err := keys.Generate()
	require.NoError(b, err)
	_, err = tenant.Init(ctx, owner, k)
	require.NoError(b, err)
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		tn, _, err := tenant.Create(ctx, owner, k, fmt.Sprintf("bench-%d", i))
		require.NoError(b, err)
		ids[i] = tn.ID
	}
	appendFn := chain.Append
	if schema == sideBefore12 {
		_, err := owner.Exec(ctx, dropChecks)
		require.NoError(b, err)
		appendFn = chain.AppendBeforeTrust
	}
	if schema == sideUnenforced {
		// Today's path before migration 004: insert the rows and update the
		// head, nothing checked. The plain append_journal takes the same
		// arguments as the enforced one (append_writes_its_outbox: the
		// outbox rows of the append's events with them) and makes the same
		// writes in the same one statement as its fast path
		// (append_fast_path), without the checks (the rights and tenant
		// expression, the previous event's probe and the links within the
		// append, the setting that skips the triggers, SECURITY DEFINER),
		// so the two sides differ by the checks alone.
		_, err := owner.Exec(ctx, dropChecks+`
		                          CREATE OR REPLACE FUNCTION oml.append_journal(
		                              p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[],
		                              p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamptz[],
		                              p_outbox_journal_seq bigint[], p_outbox_target text[], p_outbox_op text[],
		                              p_outbox_artifact_id text[], p_outbox_version integer[], p_outbox_payload text[])
		                              RETURNS bigint LANGUAGE plpgsql AS $$
		                          DECLARE n bigint;
		                          BEGIN
		                              WITH j AS (
		                                  INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
		                                  SELECT p_tenant, s, p, h, g, p_key_id, t, b, r
		                                    FROM unnest(p_seq, p_prev_hash, p_hash, p_signature, p_event_type, p_payload, p_recorded_at)
		                                         WITH ORDINALITY AS u(s, p, h, g, t, b, r, ord)
		                                   ORDER BY ord
		                                  RETURNING 1
		                              ), o AS (
		                                  INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
		                                  SELECT p_tenant, js, tg, op, a, v, pl::jsonb
		                                    FROM unnest(p_outbox_journal_seq, p_outbox_target, p_outbox_op, p_outbox_artifact_id,
		                                                p_outbox_version, p_outbox_payload) WITH ORDINALITY AS u(js, tg, op, a, v, pl, ord)
		                                   ORDER BY ord
		                              ), hd AS (
		                                  UPDATE oml.chain_heads
		                                     SET seq = p_seq[array_length(p_seq, 1)], hash = p_hash[array_length(p_seq, 1)],
		                                         updated_at = p_recorded_at[array_length(p_seq, 1)]
		                                   WHERE tenant_id = p_tenant
		                              )
		                              SELECT count(*) FROM j INTO n;
		                              RETURN n;
		                          END $$`)
		require.NoError(b, err)
	}
	cfg, err := pgconn.ParseConfig(db.URL, pgconn.Options{MaxConns: int32(writers + 2)})
	require.NoError(b, err)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE oml_app")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return &benchEnv{owner: owner, pool: pool, key: k, ids: ids, writers: writers, batch: batch, append: appendFn}
}

// run makes n appends of env.batch claim.submitted events (256-byte body)
// on env.writers goroutines, spread over the tenants, and returns the time
// they took.
func (env *benchEnv) run(b *testing.B, n int) time.Duration {
	ctx := context.Background()
	body := make([]byte, 256)
	dek := make([]byte, 32)
	sum := digest(body)
	mk := func(n int64) journal.Event {
		ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
			ArtifactID: fmt.Sprintf("a%d", n), Version: 1, WorkareaID: "wa", Writer: "w", Principal: "p",
			Provenance: "agent", PlaintextDigest: sum, CiphertextDigest: sum,
		}, body, dek)
		if err != nil {
			panic(err)
		}
		return ev
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, env.writers)
	start := time.Now()
	for w := range env.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]journal.Event, env.batch)
			for {
				if next.Add(1) > int64(n) {
					return
				}
				for j := range evs {
					evs[j] = mk(env.artifact.Add(1))
				}
				tn := env.ids[int(env.turns.Add(1)+int64(w))%len(env.ids)]
				if _, err := env.append(ctx, env.pool, env.key, tn, evs...); err != nil {
					errs <- err
					return
				}
				env.appended.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return elapsed
}

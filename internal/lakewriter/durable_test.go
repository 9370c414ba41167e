package lakewriter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// pair is a deployment on a private primary with one streaming standby.
type pair struct {
	*bundle
	primary, standby *testdb.Node
	standbyURL       string
}

func setupPair(t *testing.T, tenants int) *pair {
	t.Helper()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	// A walsender whose receiver stopped answering stays listed (state
	// streaming) until wal_sender_timeout; keep it listed for the whole
	// test, so what is seen is the fence waiting, not the standby leaving.
	admin, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `ALTER SYSTEM SET wal_sender_timeout = '10min'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))
	url := primary.CreateDatabase(t, "oml", schema.Migrate)
	standby := testdb.StartStandby(t, primary)
	pool, err := pgconn.Open(ctx, url, pgconn.Options{ApplicationName: "oml-test"})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	k, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(t, err)
	d := &testkit.Deployment{Pool: pool, Key: k}
	for i := 0; i < tenants; i++ {
		tn, _, err := tenant.Create(ctx, pool, k, fmt.Sprintf(testkit.NameFormat, i))
		require.NoError(t, err)
		d.Tenants = append(d.Tenants, tn.ID)
	}
	return &pair{bundle: &bundle{Deployment: d, pool: pool, key: k, tenants: d.Tenants},
		primary: primary, standby: standby, standbyURL: standby.URL("oml")}
}

// witnessedSeqs lists the newest witnessed seq of every tenant in lake.
func (p *pair) witnessedSeqs(t *testing.T, lake store.Store) map[string]string {
	t.Helper()
	return witnessedSeqs(t, lake)
}

// witnessedSeqs is each tenant's newest witness file in lake.
func witnessedSeqs(t *testing.T, lake store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	after := ""
	for {
		infos, err := lake.List(context.Background(), witness.Prefix, after)
		require.NoError(t, err)
		if len(infos) == 0 {
			return out
		}
		for _, in := range infos {
			tenant, file, _ := strings.Cut(strings.TrimPrefix(in.Key, witness.Prefix), "/")
			if file > out[tenant] {
				out[tenant] = file
			}
		}
		after = infos[len(infos)-1].Key
	}
}

// standbySeq is the newest outbox seq the standby has replayed (its
// receiver stopped, that is at most what it flushed).
func (p *pair) standbySeq(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.standbyURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM oml.outbox`).Scan(&s))
	return s
}

func (p *pair) drainer(t *testing.T, lake store.Store, policy replication.Policy, timeout time.Duration) *lakewriter.Drainer {
	t.Helper()
	o := p.opts(lake)
	o.Durable, o.DurableTimeout = policy, timeout
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	return d
}

// TestDurable_StandbyStopsFlushing_DrainWaitsNamingItThenResumes: with a
// real streaming standby whose WAL receiver is frozen, the lake writer
// (auto, and N=1) drains nothing past what the standby holds and names it,
// and its witness publisher signs no head the standby lacks; --durable-on
// none proceeds; the long-running loop waits, reporting the
// standby in its metrics, and catches up by itself once the receiver
// resumes. Every row ends in the lake exactly once.
func TestDurable_StandbyStopsFlushing_DrainWaitsNamingItThenResumes(t *testing.T) {
	ctx := context.Background()
	p := setupPair(t, 2)
	lake := store.NewMem()
	p.load(t, workload.Config{Claims: 5, Seed: 71})
	auto := replication.DefaultPolicy
	p.drainAll(t, p.drainer(t, lake, auto, 20*time.Second))
	before := p.lastSeq(t)

	witnessed := p.witnessedSeqs(t, lake)
	require.NotEmpty(t, witnessed)
	resume := testdb.StopWALReceiver(t, p.standby)
	p.load(t, workload.Config{Claims: 5, Seed: 72})
	require.Greater(t, p.lastSeq(t), before)
	held := p.standbySeq(t)

	for _, policy := range []replication.Policy{auto, {Mode: replication.ModeCount, N: 1}} {
		d := p.drainer(t, lake, policy, 300*time.Millisecond)
		sum, err := d.DrainOnce(ctx)
		require.NoError(t, err, "waiting is lag, not an error")
		require.Equal(t, before, d.Frontier(), "%s: nothing past what the standby flushed is cut", policy)
		require.LessOrEqual(t, d.Frontier(), held)
		require.True(t, sum.DurabilityHeld, policy.String())
		require.NotNil(t, sum.Durability)
		require.Len(t, sum.Durability.Waiting, 1, "the standby is named")
		require.Contains(t, sum.Durability.Reason, sum.Durability.Waiting[0].Name)
		require.Positive(t, sum.Durability.Waiting[0].BehindBytes)
	}

	// The witness publisher does not sign heads the standby lacks either
	// (nor did it in the passes above, which replayed the newest batch).
	d := p.drainer(t, lake, auto, 200*time.Millisecond)
	d.PublishWitnessesNow(ctx, p.tenants)
	require.Equal(t, witnessed, p.witnessedSeqs(t, lake), "no head the standby has not flushed is witnessed")

	// --durable-on none does not look at the standbys.
	none := p.drainer(t, lake, replication.Policy{Mode: replication.ModeNone}, time.Millisecond)
	none.PublishWitnessesNow(ctx, p.tenants)
	require.NotEqual(t, witnessed, p.witnessedSeqs(t, lake), "none witnesses the primary's heads")
	sum, err := none.DrainOnce(ctx)
	require.NoError(t, err)
	require.False(t, sum.DurabilityHeld)
	require.Equal(t, p.lastSeq(t), none.Frontier())

	// The loop waits, with the standby in its metrics, and resumes alone.
	p.load(t, workload.Config{Claims: 5, Seed: 73})
	target := p.lastSeq(t)
	reg := prometheus.NewRegistry()
	m := lakewriter.NewMetrics(reg)
	o := p.opts(lake)
	o.Metrics = m
	// Only the cut reports here: the witness publisher (which also waits
	// for the standby, after a batch) would set the same gauges.
	o.WitnessInterval = -1
	loop, err := lakewriter.New(o)
	require.NoError(t, err)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.Run(lctx) }()
	start := none.Frontier()
	waitFor(t, "the loop to report the lagging standby", func() bool {
		if f := loop.Frontier(); f > start {
			t.Fatalf("the loop cut past what the standby flushed: frontier %d, was %d", f, start)
		}
		return testutil.ToFloat64(m.DurabilityBlocked) == 1 && testutil.CollectAndCount(m.StandbyBehind) == 1
	})
	require.Equal(t, none.Frontier(), loop.Frontier(), "the loop cuts nothing the standby has not flushed")
	v := loop.Durability()
	require.NotNil(t, v)
	require.False(t, v.Durable)
	require.Len(t, v.Waiting, 1)

	resume()
	waitFor(t, "the loop to catch up after the standby resumed", func() bool { return loop.Frontier() >= target })
	waitFor(t, "the durability gauge to clear", func() bool { return testutil.ToFloat64(m.DurabilityBlocked) == 0 })
	cancel()
	require.NoError(t, <-done)
	p.verifyLake(t, lake)
	require.GreaterOrEqual(t, p.standbySeq(t), before, "the standby caught up")

	// A writer role that may not see pg_stat_replication's positions is
	// told so (configuration), never left to read NULL as "flushed".
	p.load(t, workload.Config{Claims: 2, Seed: 74})
	lw := p.roleWithoutMonitor(t)
	o = p.opts(lake)
	o.DB = lw
	blind, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = blind.DrainOnce(ctx)
	var hidden *replication.HiddenError
	require.ErrorAs(t, err, &hidden)
	require.Contains(t, err.Error(), "GRANT pg_monitor TO oml_blind_writer")
	require.Equal(t, target, blind.Frontier(), "nothing was cut")
	o.Durable = replication.Policy{Mode: replication.ModeNone}
	blind, err = lakewriter.New(o)
	require.NoError(t, err)
	p.drainAll(t, blind)
	p.verifyLake(t, lake)
}

// roleWithoutMonitor is a pool for a login role that can do the lake
// writer's work in the oml schema but is not a member of pg_monitor.
func (p *pair) roleWithoutMonitor(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	for _, s := range []string{
		`CREATE ROLE oml_blind_writer LOGIN BYPASSRLS`,
		`GRANT USAGE ON SCHEMA oml TO oml_blind_writer`,
		`GRANT ALL ON ALL TABLES IN SCHEMA oml TO oml_blind_writer`,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA oml TO oml_blind_writer`,
	} {
		_, err := p.pool.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	pool, err := pgconn.Open(ctx, p.primary.URL("oml")+"&user=oml_blind_writer", pgconn.Options{ApplicationName: "oml-test"})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestDurable_SingleNode_AutoProceeds_CountWaitsAndOnceEndsBounded: on a
// node with no standby, auto drains (a single node never stalls the
// writer), while --durable-on 1 waits and a --once pass ends after its
// DurableTimeout with nothing cut and the reason, instead of hanging.
func TestDurable_SingleNode_AutoProceeds_CountWaitsAndOnceEndsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 5, Seed: 81})
	lake := store.NewMem()

	o := b.opts(lake)
	o.Durable, o.DurableTimeout = replication.Policy{Mode: replication.ModeCount, N: 1}, 200*time.Millisecond
	one, err := lakewriter.New(o)
	require.NoError(t, err)
	sum, err := one.DrainOnce(ctx)
	require.NoError(t, err)
	require.True(t, sum.DurabilityHeld)
	require.Zero(t, one.Frontier())
	require.Zero(t, sum.Batches)
	require.Equal(t, 1, sum.Durability.Missing)
	require.Contains(t, sum.Durability.Reason, "none is streaming")

	sum = b.drainInto(t, lake)
	require.Positive(t, sum.Rows)
	b.verifyLake(t, lake)

	// Nothing new to cut: nothing to wait for, even under a policy that
	// could never be met here.
	o.DurableTimeout = time.Hour
	idle, err := lakewriter.New(o)
	require.NoError(t, err)
	sum, err = idle.DrainOnce(ctx)
	require.NoError(t, err)
	require.False(t, sum.DurabilityHeld)
	require.Equal(t, b.lastSeq(t), idle.Frontier())
}

// waitFor polls cond (a state to reach, not a timing claim) for at most a
// minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

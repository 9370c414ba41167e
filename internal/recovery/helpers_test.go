package recovery_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// failover is a primary that lost its tail: the old primary (which kept
// writing and draining after the standby's copy was taken) and the
// "promoted" database, a copy of the old primary taken earlier
// (CREATE DATABASE ... TEMPLATE), both against one lake.
type failover struct {
	old, promoted *pgxpool.Pool
	promotedDB    *testdb.DB
	key           *keys.Key
	lake          store.Store
	tenants       []uuid.UUID
}

// copyDB captures db as it is now into a new database (no connection may
// be open on db while it is cloned: the pool is reset and any straggler
// ended).
func copyDB(t *testing.T, db *testdb.DB, pool *pgxpool.Pool) *testdb.DB {
	t.Helper()
	ctx := context.Background()
	pool.Reset()
	admin := testdb.Cluster(t)
	conn, err := pgx.Connect(ctx, admin.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db.Name)
	require.NoError(t, err)
	name := db.Name + "_b"
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{db.Name}.Sanitize())
	require.NoError(t, err)
	return &testdb.DB{Name: name, URL: admin.URL(name)}
}

// drainOpts are lake writer options for a test; witness publishes every
// batch when key is set.
func drainOpts(pool *pgxpool.Pool, lake store.Store, key *keys.Key) lakewriter.Options {
	o := testkit.DrainOptions(pool, lake, key)
	o.PoisonBudget, o.Limits, o.WitnessInterval = 2, outbox.Limits{Rows: 40}, time.Nanosecond
	return o
}

func lastSeq(t *testing.T, pool *pgxpool.Pool) int64 { t.Helper(); return testkit.LastSeq(t, pool) }

// drainAll drains until the lake holds the whole outbox.
func drainAll(t *testing.T, pool *pgxpool.Pool, lake store.Store, key *keys.Key) {
	t.Helper()
	testkit.Drain(t, drainOpts(pool, lake, key))
}

func load(t *testing.T, pool *pgxpool.Pool, key *keys.Key, tenants []uuid.UUID, seed uint64) {
	t.Helper()
	testkit.Load(t, pool, key, workload.Config{Tenants: tenants, Claims: 12, Seed: seed, PromoteRatio: 0.7, RetractRatio: 0.3})
}

// newFailover: a deployment with two tenants writes and drains (with
// witnesses when witnessed), the standby's copy is taken, then the old
// primary writes more — including a new tenant, so the provider chain
// loses its tail too — and drains it all. The promoted copy is behind the
// lake.
func newFailover(t *testing.T, witnessed bool) *failover {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	d := testkit.NewDeploymentOn(t, db, 2)
	lake := testkit.FileLake(t)
	var wkey *keys.Key
	if witnessed {
		wkey = d.Key
	}
	load(t, d.Pool, d.Key, d.Tenants, 1)
	drainAll(t, d.Pool, lake, wkey)
	promotedDB := copyDB(t, db, d.Pool)

	load(t, d.Pool, d.Key, d.Tenants, 2)
	tn, _, err := tenant.Create(ctx, d.Pool, d.Key, "late")
	require.NoError(t, err)
	tenants := append(append([]uuid.UUID{}, d.Tenants...), tn.ID)
	load(t, d.Pool, d.Key, tenants, 3)
	drainAll(t, d.Pool, lake, wkey)
	return &failover{old: d.Pool, promoted: promotedDB.Pool(t), promotedDB: promotedDB, key: d.Key, lake: lake, tenants: tenants}
}

type event struct {
	tenant uuid.UUID
	seq    int64
}

// chainOf reads every (tenant, seq) -> (hash, event_type) of a journal.
func chainOf(t *testing.T, pool *pgxpool.Pool) map[event]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT tenant_id, seq, hash, event_type FROM oml.journal`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[event]string{}
	for rows.Next() {
		var e event
		var h []byte
		var typ string
		require.NoError(t, rows.Scan(&e.tenant, &e.seq, &h, &typ))
		out[e] = hex.EncodeToString(h) + " " + typ
	}
	require.NoError(t, rows.Err())
	return out
}

// requireJournalEqualsOld: every event of the old primary is in the
// promoted journal with the same hash, and the only other events are the
// restores' chain.tail_restored (and what except allows).
func requireJournalEqualsOld(t *testing.T, f *failover, except func(event, string) bool) {
	t.Helper()
	old, now := chainOf(t, f.old), chainOf(t, f.promoted)
	for e, h := range old {
		require.Equal(t, h, now[e], "tenant %s seq %d", e.tenant, e.seq)
	}
	for e, h := range now {
		if _, ok := old[e]; ok {
			continue
		}
		if except != nil && except(e, h) {
			continue
		}
		require.Contains(t, h, string(journal.TypeChainTailRestored), "tenant %s seq %d is new on the promoted journal", e.tenant, e.seq)
	}
}

func requireFoldsAgree(t *testing.T, pool *pgxpool.Pool, tenants ...uuid.UUID) {
	t.Helper()
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, tenants...) {
		require.NoError(t, journal.CheckFold(context.Background(), pool, tn), "tenant %s", tn)
	}
}

func requireReconcileClean(t *testing.T, pool *pgxpool.Pool, lake store.Store) {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), pool, lake, reconcile.Options{StaleAfter: time.Hour, TempDir: t.TempDir()})
	require.NoError(t, err)
	for _, fd := range rep.Findings {
		t.Errorf("reconcile finding: %s", fmt.Sprint(fd))
	}
	require.Zero(t, rep.Total())
}

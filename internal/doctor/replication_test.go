package doctor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/pgdev"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

// TestDoctor_Replication_SingleNodeWarns: the test cluster has no standby.
func TestDoctor_Replication_SingleNodeWarns(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	c := requireStatus(t, b.doctor(t, nil), doctor.IDReplication, doctor.StatusWarn)
	require.Contains(t, c.Summary, "single node")
	require.Equal(t, "single-node", c.Data["profile"])
	require.Equal(t, 0, c.Data["streaming"])
}

// TestDoctor_Replication_AsyncWarns_SyncQuorumOK_MissingSyncStandbyFails
// grades a real primary with one streaming standby against the production
// profile, as its settings change under it.
func TestDoctor_Replication_AsyncWarns_SyncQuorumOK_MissingSyncStandbyFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	// A frozen receiver's walsender stays listed for the whole test.
	setSystem(t, primary, `ALTER SYSTEM SET wal_sender_timeout = '10min'`)
	url := primary.CreateDatabase(t, "oml", schema.Migrate)
	standby := testdb.StartStandby(t, primary)
	pool, err := pgconn.Open(ctx, url, pgconn.Options{ApplicationName: "oml-test"})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := doctor.Options{DB: func(context.Context) (*pgxpool.Pool, error) { return pool, nil }, Timeout: 5 * time.Second}
	replicationCheck := func() doctor.Result { return check(t, doctor.Run(ctx, opts), doctor.IDReplication) }

	// A standby that has just started is listed as catching up before it
	// streams; the profile is judged on streaming standbys only.
	waitUntil(t, "the standby to stream", func() bool { return replicationCheck().Data["profile"] == "asynchronous" })
	c := replicationCheck()
	require.Equal(t, doctor.StatusWarn, c.Status, c.Summary)
	require.Contains(t, c.Summary, "asynchronous replication to 1 standby")
	require.Equal(t, "asynchronous", c.Data["profile"])

	// Rows wait while the standby flushes nothing: the lag check says what
	// a lake writer is waiting for, naming the standby.
	k, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(t, err)
	resume := testdb.StopWALReceiver(t, standby)
	_, _, err = tenant.Create(ctx, pool, k, "acme")
	require.NoError(t, err)
	lag := check(t, doctor.Run(ctx, opts), doctor.IDLag)
	require.Contains(t, strings.Join(lag.Details, "\n"), "a lake writer with --durable-on auto is waiting for")
	standbys := c.Data["standbys"].([]map[string]any)
	require.Len(t, standbys, 1)
	require.Contains(t, strings.Join(lag.Details, "\n"), standbys[0]["name"].(string))
	resume()

	// Migrated without oml init: oml_lakewriter cannot read the standbys'
	// positions, and the check says what an administrator must run
	// (whoever runs doctor: here a superuser, who sees them all).
	require.Equal(t, false, c.Data["lakewriter_reads_standbys"])
	require.Contains(t, strings.Join(c.Details, "\n"), "an administrator must run: GRANT pg_monitor TO oml_lakewriter;")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	g, err := schema.GrantMonitor(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, schema.MonitorGranted, g)
	require.NoError(t, conn.Close(ctx))
	c = replicationCheck()
	require.Equal(t, true, c.Data["lakewriter_reads_standbys"])
	require.NotContains(t, strings.Join(c.Details, "\n"), "pg_monitor")

	setSystem(t, primary, `ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (*)'`, `ALTER SYSTEM SET synchronous_commit = 'remote_apply'`)
	waitUntil(t, "the standby to acknowledge commits", func() bool { return replicationCheck().Status == doctor.StatusOK })
	c = replicationCheck()
	require.Equal(t, "synchronous-quorum", c.Data["profile"], c.Summary)
	require.Equal(t, 1, c.Data["sync_connected"])

	standby.Stop(t, pgdev.Fast)
	waitUntil(t, "the standby to leave", func() bool { return replicationCheck().Status == doctor.StatusFail })
	c = replicationCheck()
	require.Contains(t, c.Summary, "every commit hangs")
}

func setSystem(t *testing.T, n *testdb.Node, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range append(stmts, `SELECT pg_reload_conf()`) {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
}

// waitUntil polls a state (not a timing claim) for at most a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

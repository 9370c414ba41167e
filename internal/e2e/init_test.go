package e2e_test

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// oml init and pg_monitor, on a private cluster (the grant is cluster-wide):
// a non-superuser owner (no CREATEROLE, no ADMIN OPTION on pg_monitor)
// initialises its database, exit 0, and is told the exact statement an
// administrator must run; doctor's replication check says the lake writer
// role cannot read the standbys' positions, with the same statement. Once
// an administrator ran it, both are quiet. A superuser's oml init grants it
// itself.
func TestInit_PgMonitor_NonSuperuserOwnerToldTheStatementSuperuserGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	_ = primary.CreateDatabase(t, "oml", schema.Migrate) // the job roles exist on the cluster now
	su, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	defer su.Close(ctx)
	for _, stmt := range []string{
		`CREATE ROLE owner_nosu LOGIN NOSUPERUSER NOCREATEROLE`,
		`CREATE DATABASE owned OWNER owner_nosu`,
	} {
		_, err := su.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	u, err := url.Parse(primary.URL("owned"))
	require.NoError(t, err)
	u.User = url.User("owner_nosu")
	dir := t.TempDir()
	e := env{
		cliutil.EnvDatabaseURL:    u.String(),
		cliutil.EnvLakeURL:        "file://" + filepath.Join(dir, "lake"),
		cliutil.EnvSigningKeyFile: filepath.Join(dir, "deploy.key"),
	}
	e.ok(t, "key", "generate", "--out", e[cliutil.EnvSigningKeyFile])

	r := e.run(t, "init")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "an administrator must run: GRANT pg_monitor TO oml_lakewriter;")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "init", "-o", "json")), &doc))
	require.Equal(t, "needs-admin", doc["pg_monitor"])
	require.Equal(t, schema.MonitorGrantSQL, doc["pg_monitor_statement"])
	_, c := e.doctorCheck(t, "replication")
	require.Equal(t, false, c["data"].(map[string]any)["lakewriter_reads_standbys"])
	require.Contains(t, c["details"], "the lake writer role oml_lakewriter cannot read the standbys' positions (pg_stat_replication shows them as NULL without pg_monitor), so a lake writer logged in through it cannot judge --durable-on once a standby streams; an administrator must run: GRANT pg_monitor TO oml_lakewriter;")

	// The administrator runs the statement.
	_, err = su.Exec(ctx, schema.MonitorGrantSQL)
	require.NoError(t, err)
	doc = map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "init", "-o", "json")), &doc))
	require.Equal(t, "already", doc["pg_monitor"])
	require.NotContains(t, doc, "pg_monitor_statement")
	_, c = e.doctorCheck(t, "replication")
	require.Equal(t, true, c["data"].(map[string]any)["lakewriter_reads_standbys"])

	// A superuser's oml init grants it itself.
	_, err = su.Exec(ctx, `REVOKE pg_monitor FROM oml_lakewriter`)
	require.NoError(t, err)
	e[cliutil.EnvDatabaseURL] = primary.URL("oml")
	out := e.ok(t, "init")
	require.Contains(t, out, "Granted pg_monitor to oml_lakewriter")
	doc = map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "init", "-o", "json")), &doc))
	require.Equal(t, "already", doc["pg_monitor"])
}

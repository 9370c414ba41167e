package lakecmd_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

// copyDatabase captures e's database as it is now into a new database of
// the same cluster (a stand-in for a standby that stops receiving here)
// and returns its URL.
func copyDatabase(t *testing.T, e *clitest.Env) string {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(e.URL)
	require.NoError(t, err)
	e.Pool.Reset()
	admin := testdb.Cluster(t)
	conn, err := pgx.Connect(ctx, admin.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, cfg.Database)
	require.NoError(t, err)
	name := cfg.Database + "_p"
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{cfg.Database}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin.URL("postgres"))
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	return admin.URL(name)
}

func runWithInput(t *testing.T, vars map[string]string, input string, args ...string) (cliutil.ExitCode, string, string) {
	t.Helper()
	io, in, out, errOut := iostreams.Test()
	io.SetStdinTTY(true)
	in.WriteString(input)
	code := cli.Run(context.Background(), io, args, func(k string) string { return vars[k] })
	return code, out.String(), errOut.String()
}

// TestLakeRepairCmd_DivergedAfterRestore_ConfirmJSONThenNothing drives
// `oml lake repair` as an operator would after a restore that lost a tail
// the lake drained, on which the application wrote: drain refuses; the plan
// names accept-fork; after it, --dry-run shows the plan (exit 1); without a
// terminal and without --yes nothing runs (exit 2); on a terminal "n"
// changes nothing; --yes -o json repairs and names the archive; the drain
// then succeeds, reconcile is clean, and a second repair has nothing to do.
func TestLakeRepairCmd_DivergedAfterRestore_ConfirmJSONThenNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := clitest.New(t, "acme")
	id := e.Tenants["acme"]
	cfg := workload.Config{Tenants: []uuid.UUID{id}, Claims: 8, Seed: 1, PromoteRatio: 0.7, RetractRatio: 0.3}
	_, err := workload.Run(ctx, e.Pool, e.Key, cfg)
	require.NoError(t, err)
	drain := func(vars map[string]string) cliutil.ExitCode {
		code, _, _ := e.Run(t, vars, "lake", "drain", "--once", "--log-level", "error")
		return code
	}
	require.Equal(t, cliutil.ExitOK, drain(nil))
	restored := copyDatabase(t, e)
	cfg.Seed = 2
	_, err = workload.Run(ctx, e.Pool, e.Key, cfg) // the tail the restore loses
	require.NoError(t, err)
	require.Equal(t, cliutil.ExitOK, drain(nil))

	vars := e.Vars()
	vars[cliutil.EnvDatabaseURL] = restored
	rpool := testdb.OpenPool(t, restored)
	cfg.Seed = 3
	_, err = workload.Run(ctx, rpool, e.Key, cfg) // written over the loss
	require.NoError(t, err)
	require.Equal(t, cliutil.ExitFindings, drain(vars), "the drain refuses a diverged lake")

	code, out, stderr := e.Run(t, vars, "lake", "repair", "--dry-run")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	require.Contains(t, out, "accept-fork")

	code, _, stderr = e.Run(t, vars, "chain", "accept-fork", "--tenant", "acme", "--reason", "restored from backup", "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, stderr = e.Run(t, vars, "lake", "repair", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	var dry struct {
		Plan struct {
			Digest string `json:"plan_digest"`
			Tables []struct {
				Action string `json:"action"`
			} `json:"tables"`
		} `json:"plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &dry))
	require.NotEmpty(t, dry.Plan.Tables)

	code, _, stderr = e.Run(t, vars, "lake", "repair")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--yes")

	code, out, _ = runWithInput(t, vars, "n\n", "lake", "repair", "--table", "bronze")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, out, "rewind")
	code, _, _ = e.Run(t, vars, "lake", "repair", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code, "answering no changed nothing")

	code, out, stderr = e.Run(t, vars, "lake", "repair", "--yes", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var res struct {
		Archive  string `json:"archive"`
		Repaired []struct {
			Archive string `json:"archive"`
		} `json:"repaired"`
		Journal []struct {
			Seq int64 `json:"seq"`
		} `json:"journal"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "_oml_repair", res.Archive)
	require.Len(t, res.Repaired, len(dry.Plan.Tables))
	require.NotEmpty(t, res.Repaired[0].Archive)
	require.Len(t, res.Journal, 1)

	require.Equal(t, cliutil.ExitOK, drain(vars))
	code, _, stderr = e.Run(t, vars, "reconcile")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	code, out, stderr = e.Run(t, vars, "lake", "repair", "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Nothing to repair")

	code, _, _ = e.Run(t, vars, "lake", "repair", "--class", "bogus", "--dry-run")
	require.Equal(t, cliutil.ExitUsage, code)
}

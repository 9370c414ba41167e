package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

func TestMain(m *testing.M) {
	code := testdb.Run(m, testdb.WithTemplate(schema.Migrate))
	removeBinary()
	os.Exit(code)
}

type result struct {
	code   cliutil.ExitCode
	stdout string
	stderr string
}

type env map[string]string

func (e env) run(t *testing.T, args ...string) result {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, args, func(k string) string { return e[k] })
	return result{code, out.String(), errOut.String()}
}

func (e env) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := e.run(t, args...)
	require.Equalf(t, cliutil.ExitOK, r.code, "oml %s: stderr: %s", strings.Join(args, " "), r.stderr)
	return r.stdout
}

// deployment: a database with a deployment key and `oml init` done.
func deployment(t *testing.T) env {
	t.Helper()
	db := testdb.New(t)
	dir := t.TempDir()
	e := env{
		cliutil.EnvDatabaseURL:    db.URL,
		cliutil.EnvLakeURL:        "file://" + filepath.Join(dir, "lake"),
		cliutil.EnvSigningKeyFile: filepath.Join(dir, "deploy.key"),
	}
	e.ok(t, "key", "generate", "--out", e[cliutil.EnvSigningKeyFile])
	e.ok(t, "init")
	return e
}

// The README's flow: tenants, a workload with poison rows, one drain pass,
// status, then every chain verifies and the dead letters are named.
func TestDrainOnce_PoisonWorkload_StatusAndChainVerify(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "3", "--claims", "20", "--poison", "3", "--seed", "5")

	// With --fail-on-dead-letter the pass exits 1 and says why.
	r := e.run(t, "lake", "drain", "--once", "--poison-budget", "1", "--fail-on-dead-letter", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stderr)
	require.Contains(t, r.stderr, "dead-lettered")
	var sum struct {
		EndFrontier  int64   `json:"end_frontier"`
		DeadLettered []int64 `json:"dead_lettered"`
		Refused      []any   `json:"refused"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.Len(t, sum.DeadLettered, 3)
	require.Empty(t, sum.Refused)

	// The dead letters journalled materialize.skipped; a second pass drains
	// those bronze rows too and leaves no backlog.
	e.ok(t, "lake", "drain", "--once")
	var st struct {
		Frontier    int64 `json:"frontier"`
		LastSeq     int64 `json:"last_seq"`
		BacklogRows int64 `json:"backlog_rows"`
		DeadLetters int64 `json:"dead_letters"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "lake", "status", "-o", "json")), &st))
	require.Equal(t, st.LastSeq, st.Frontier)
	require.Zero(t, st.BacklogRows)
	require.EqualValues(t, 3, st.DeadLetters)

	tables := e.ok(t, "lake", "status", "--tables")
	require.Contains(t, tables, "/silver/claims")

	verify := e.run(t, "chain", "verify")
	require.Equal(t, cliutil.ExitOK, verify.code, verify.stdout+verify.stderr)
}

// Bad input: one line on stderr, exit 2, nothing printed on stdout.
func TestDrain_BadInputIsOneLineExit2(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	noLake := env{cliutil.EnvDatabaseURL: e[cliutil.EnvDatabaseURL]}
	cases := []struct {
		name string
		e    env
		args []string
		want string
	}{
		{"no lake", noLake, []string{"lake", "drain", "--once"}, "no lake configured"},
		{"bad batch bytes", e, []string{"lake", "drain", "--once", "--batch-bytes", "lots"}, "--batch-bytes"},
		{"zero batch rows", e, []string{"lake", "drain", "--batch-rows", "0"}, "--batch-rows"},
		{"fail-on-dead-letter without once", e, []string{"lake", "drain", "--fail-on-dead-letter"}, "only applies with --once"},
		{"bad lake url", env{cliutil.EnvDatabaseURL: e[cliutil.EnvDatabaseURL], cliutil.EnvLakeURL: "ftp://x/y"}, []string{"lake", "drain", "--once"}, "ftp"},
		{"unreachable database", env{cliutil.EnvDatabaseURL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", cliutil.EnvLakeURL: e[cliutil.EnvLakeURL]},
			[]string{"lake", "status"}, "cannot reach the database"},
		{"missing key file", env{cliutil.EnvDatabaseURL: e[cliutil.EnvDatabaseURL], cliutil.EnvLakeURL: e[cliutil.EnvLakeURL], cliutil.EnvSigningKeyFile: "/nonexistent/key"},
			[]string{"lake", "drain", "--once"}, "/nonexistent/key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.e.run(t, c.args...)
			require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, c.want)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			require.LessOrEqual(t, len(lines), 2, "one error line (plus a usage hint for flag errors): %q", r.stderr)
		})
	}
}

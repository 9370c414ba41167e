package devcmd_test

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/devcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
)

type result struct {
	stdout, stderr string
	err            error
	code           cliutil.ExitCode
}

// run executes `oml dev ARGS...` through a minimal root carrying the global
// -o flag, the way cli.Run wires it.
func run(t *testing.T, args ...string) result {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	f := cliutil.New(io)
	f.Getenv = func(string) string { return "" }
	root := &cobra.Command{Use: "oml", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVarP(&f.Flags.Output, "output", "o", "", "")
	root.AddCommand(devcmd.NewCmd(f))
	root.SetArgs(append([]string{"dev"}, args...))
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(context.Background())
	return result{stdout: out.String(), stderr: errOut.String(), err: err, code: cliutil.ExitCodeFor(err)}
}

// workDir is a fresh working directory the server user can reach (t.TempDir
// is 0700, which the postgres user cannot enter when tests run as root).
func workDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	stopAtEnd(t, d)
	return d
}

// stopAtEnd stops any cluster `dev up --dir dir` left running, before
// t.TempDir's removal (cleanups run last-registered first).
func stopAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() { run(t, "down", "--dir", dir) })
}

// envOf evaluates `dev env` output in a shell and returns the variables,
// proving the quoting survives a real shell.
func envOf(t *testing.T, out string) map[string]string {
	t.Helper()
	sh := exec.Command("/bin/sh", "-c", out+"\nprintf '%s\\n%s\\n' \"$OML_DATABASE_URL\" \"$OML_LAKE_URL\"")
	b, err := sh.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	return map[string]string{"OML_DATABASE_URL": lines[0], "OML_LAKE_URL": lines[1]}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestDev_UpEnvDownLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := workDir(t)

	r := run(t, "env", "--dir", dir)
	require.Equal(t, cliutil.ExitUsage, r.code, "env before up")
	require.ErrorContains(t, r.err, "oml dev up")

	r = run(t, "up", "--dir", dir)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Started PostgreSQL")
	require.Contains(t, r.stderr, "Initialised a PostgreSQL")
	require.DirExists(t, filepath.Join(dir, ".oml", "pgdata"))
	require.DirExists(t, filepath.Join(dir, ".oml", "lake"))

	r = run(t, "up", "--dir", dir)
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "Already running")

	r = run(t, "env", "--dir", dir)
	require.NoError(t, r.err)
	env := envOf(t, r.stdout)
	require.Equal(t, "file://"+filepath.Join(dir, ".oml", "lake"), env["OML_LAKE_URL"])
	conn := connect(t, env["OML_DATABASE_URL"])
	var db, fsync string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database(), current_setting('fsync')").Scan(&db, &fsync))
	require.Equal(t, "oml", db)
	require.Equal(t, "on", fsync, "dev up keeps durability on")
	_, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	r = run(t, "env", "--dir", dir, "-o", "json")
	require.NoError(t, r.err)
	var js map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Equal(t, env["OML_DATABASE_URL"], js["database_url"])
	require.Equal(t, env["OML_LAKE_URL"], js["lake_url"])

	r = run(t, "down", "--dir", dir)
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "Stopped")
	r = run(t, "down", "--dir", dir)
	require.NoError(t, r.err, "down twice is fine")
	require.Contains(t, r.stdout, "not running")
	r = run(t, "env", "--dir", dir)
	require.Equal(t, cliutil.ExitUsage, r.code)

	// A restart keeps the data.
	r = run(t, "up", "--dir", dir)
	require.NoError(t, r.err, r.stderr)
	require.NotContains(t, r.stderr, "Initialised")
	conn = connect(t, env["OML_DATABASE_URL"])
	var x int
	require.NoError(t, conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x))
	require.Equal(t, 42, x)
	require.NoError(t, conn.Close(ctx))

	// A signing key or other file under .oml/ survives --purge.
	keep := filepath.Join(dir, ".oml", "signing.key")
	require.NoError(t, os.WriteFile(keep, []byte("k"), 0o600))
	r = run(t, "down", "--dir", dir, "--purge", "-o", "json")
	require.NoError(t, r.err)
	var down struct {
		WasRunning bool     `json:"was_running"`
		Purged     []string `json:"purged"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &down))
	require.True(t, down.WasRunning)
	require.Contains(t, down.Purged, filepath.Join(dir, ".oml", "pgdata"))
	require.NoDirExists(t, filepath.Join(dir, ".oml", "pgdata"))
	require.NoDirExists(t, filepath.Join(dir, ".oml", "lake"))
	require.FileExists(t, keep)
}

func TestDevUp_TCPPortAndNamedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := workDir(t)

	r := run(t, "up", "--dir", dir, "--port", "0", "--database", "scratch", "-o", "json")
	require.NoError(t, r.err, r.stderr)
	var up struct {
		Status      string `json:"status"`
		TCPAddress  string `json:"tcp_address"`
		Database    string `json:"database"`
		DatabaseURL string `json:"database_url"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &up))
	require.Equal(t, "started", up.Status)
	require.Equal(t, "scratch", up.Database)
	host, _, err := net.SplitHostPort(up.TCPAddress)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)

	r = run(t, "env", "--dir", dir, "-o", "json")
	require.NoError(t, r.err)
	var env struct {
		DatabaseURL    string `json:"database_url"`
		TCPDatabaseURL string `json:"tcp_database_url"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &env))
	require.Equal(t, up.DatabaseURL, env.DatabaseURL)
	var db string
	require.NoError(t, connect(t, env.TCPDatabaseURL).QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "scratch", db)

	r = run(t, "up", "--dir", dir, "--port", "1")
	require.Equal(t, cliutil.ExitUsage, r.code, "a different port while running")
	require.ErrorContains(t, r.err, "oml dev down")

	// Without --port, a second up finds the running server on its own port
	// and creates another database there.
	r = run(t, "up", "--dir", dir, "--database", "second")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Already running")
	r = run(t, "env", "--dir", dir)
	require.NoError(t, r.err)
	require.NoError(t, connect(t, envOf(t, r.stdout)["OML_DATABASE_URL"]).QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "second", db)
}

func TestDevUp_BadFlags(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"port out of range": {"up", "--port", "70000"},
		"empty database":    {"up", "--database", ""},
		"unknown output":    {"env", "-o", "yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append(args, "--dir", t.TempDir())
			r := run(t, args...)
			require.Equal(t, cliutil.ExitUsage, r.code)
			require.Error(t, r.err)
			require.NotContains(t, r.err.Error(), "\n", "errors are one line")
		})
	}
}

func TestDevUp_AsRootInADirectoryThePostgresUserCannotEnter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	t.Parallel()
	dir := workDir(t)
	locked := filepath.Join(dir, "private")
	require.NoError(t, os.MkdirAll(filepath.Join(locked, "proj"), 0o700))
	r := run(t, "up", "--dir", filepath.Join(locked, "proj"))
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.ErrorContains(t, r.err, "cannot enter "+locked)
	require.ErrorContains(t, r.err, "chmod o+x")
	require.NotContains(t, r.err.Error(), "\n")
}

func TestDevEnv_QuotesPathsForTheShell(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(workDir(t), "it's a dir")
	require.NoError(t, os.Mkdir(dir, 0o755))
	stopAtEnd(t, dir)
	r := run(t, "up", "--dir", dir)
	require.NoError(t, r.err, r.stderr)
	r = run(t, "env", "--dir", dir)
	require.NoError(t, r.err)
	env := envOf(t, r.stdout)
	lake, err := url.Parse(env["OML_LAKE_URL"])
	require.NoError(t, err)
	require.Equal(t, "file", lake.Scheme)
	require.Equal(t, filepath.Join(dir, ".oml", "lake"), lake.Path)
	var one int
	require.NoError(t, connect(t, env["OML_DATABASE_URL"]).QueryRow(context.Background(), "SELECT 1").Scan(&one))
	require.True(t, strings.HasPrefix(r.stdout, "export OML_DATABASE_URL='"))
}

func TestDevUp_ConcurrentInvocationsStartOneCluster(t *testing.T) {
	t.Parallel()
	dir := workDir(t)
	results := make(chan result, 3)
	for range 3 {
		go func() { results <- run(t, "up", "--dir", dir, "-o", "json") }()
	}
	statuses := map[string]int{}
	for range 3 {
		r := <-results
		require.NoError(t, r.err, r.stderr)
		var up struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &up))
		statuses[up.Status]++
	}
	require.Equal(t, map[string]int{"started": 1, "already_running": 2}, statuses)
}

// A working directory so deep that .oml/run/.s.PGSQL.5432 would exceed the
// unix socket path limit gets a short socket directory under the temp dir.
func TestDevUp_LongPathUsesAShortSocketDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(workDir(t), strings.Repeat("a-rather-long-directory-name/", 4))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	stopAtEnd(t, dir)

	r := run(t, "up", "--dir", dir, "-o", "json")
	require.NoError(t, r.err, r.stderr)
	var up struct {
		SocketDir string `json:"socket_dir"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &up))
	require.NotEqual(t, filepath.Join(dir, ".oml", "run"), up.SocketDir)
	require.Contains(t, filepath.Base(up.SocketDir), "oml-sock-")

	r = run(t, "env", "--dir", dir)
	require.NoError(t, r.err)
	var one int
	require.NoError(t, connect(t, envOf(t, r.stdout)["OML_DATABASE_URL"]).QueryRow(context.Background(), "SELECT 1").Scan(&one))

	r = run(t, "down", "--dir", dir, "--purge")
	require.NoError(t, r.err)
	require.NoDirExists(t, up.SocketDir, "--purge removes the socket directory wherever it is")
}

package pgdev_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/pgdev"
)

// reachableTempDir is t.TempDir made traversable (t.TempDir is 0700, which
// the postgres user cannot enter when the tests run as root).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	return d
}

func newCluster(t *testing.T, cfg pgdev.Config) *pgdev.Cluster {
	t.Helper()
	ctx := context.Background()
	bin, err := pgdev.FindBinaries(ctx, 0)
	if err != nil {
		t.Fatalf("%v; run scripts/ensure-postgres.sh (or make deps) first", err)
	}
	runner, err := pgdev.NewRunner(ctx)
	require.NoError(t, err)
	dir := reachableTempDir(t)
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	if cfg.SocketDir == "" {
		cfg.SocketDir = filepath.Join(dir, "run")
	}
	c, err := pgdev.New(cfg, bin, runner)
	require.NoError(t, err)
	created, err := c.Init(ctx)
	require.NoError(t, err)
	require.True(t, created)
	t.Cleanup(func() { _, _ = c.Stop(context.Background(), pgdev.Immediate) })
	return c
}

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&s))
	return s
}

func TestClusterLifecycle_InitStartQueryStopRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, pgdev.Config{})

	again, err := c.Init(ctx)
	require.NoError(t, err)
	require.False(t, again, "a second Init must keep the existing cluster")

	require.NoError(t, c.Start(ctx))
	require.ErrorIs(t, c.Start(ctx), pgdev.ErrRunning)
	st, pf, err := c.Status()
	require.NoError(t, err)
	require.Equal(t, pgdev.Running, st)
	require.Equal(t, c.Config().SocketDir, pf.SocketDir)

	require.Equal(t, "on", query(t, c.URL("postgres"), "SHOW fsync"), "durability stays on unless Unsafe")
	require.Equal(t, "200", query(t, c.URL("postgres"), "SHOW max_connections"))
	require.Equal(t, "", query(t, c.URL("postgres"), "SHOW listen_addresses"))

	created, err := c.EnsureDatabase(ctx, "oml")
	require.NoError(t, err)
	require.True(t, created)
	created, err = c.EnsureDatabase(ctx, "oml")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "oml", query(t, c.URL("oml"), "SELECT current_database()"))

	was, err := c.Stop(ctx, pgdev.Fast)
	require.NoError(t, err)
	require.True(t, was)
	st, _, _ = c.Status()
	require.Equal(t, pgdev.Stopped, st)
	was, err = c.Stop(ctx, pgdev.Fast)
	require.NoError(t, err)
	require.False(t, was)

	require.NoError(t, c.Start(ctx), "restart of a stopped cluster")
	require.Equal(t, "oml", query(t, c.URL("oml"), "SELECT current_database()"))
	require.FileExists(t, filepath.Join(c.Config().DataDir, "postgresql.log"))
}

func TestClusterStart_UnsafeAndTCPOnFreePort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, pgdev.Config{TCP: true, Unsafe: true, MaxConnections: 250})
	require.NoError(t, c.Start(ctx))
	require.NotZero(t, c.Port())
	require.Equal(t, "off", query(t, c.TCPURL("postgres"), "SHOW fsync"))
	require.Equal(t, "250", query(t, c.URL("postgres"), "SHOW max_connections"))
	require.Equal(t, strconv.Itoa(c.Port()), query(t, c.URL("postgres"), "SHOW port"))
}

func TestClusterStart_AfterKilledPostmaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, pgdev.Config{Unsafe: true})
	require.NoError(t, c.Start(ctx))
	_, pf, err := c.Status()
	require.NoError(t, err)

	// SIGKILL leaves postmaster.pid and the socket lock file behind.
	require.NoError(t, syscall.Kill(pf.PID, syscall.SIGKILL))
	waitGone(t, pf.PID)
	require.FileExists(t, filepath.Join(c.Config().DataDir, "postmaster.pid"))
	st, _, _ := c.Status()
	require.Equal(t, pgdev.Stale, st)

	require.NoError(t, c.Start(ctx))
	require.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"))
}

func TestClusterStart_PidFileNamesAnotherLiveProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, pgdev.Config{Unsafe: true})
	require.NoError(t, c.Start(ctx))
	_, err := c.Stop(ctx, pgdev.Fast)
	require.NoError(t, err)

	// A pid file whose pid was reused by an unrelated live process (after a
	// reboot or in a container): PostgreSQL alone would refuse to start.
	other := exec.Command("sleep", "300")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	pidFile := filepath.Join(c.Config().DataDir, "postmaster.pid")
	content := strconv.Itoa(other.Process.Pid) + "\n" + c.Config().DataDir + "\n1\n5432\n" + c.Config().SocketDir + "\n\n  1234   5678\nready   \n"
	require.NoError(t, os.WriteFile(pidFile, []byte(content), 0o600))
	st, _, _ := c.Status()
	require.Equal(t, pgdev.Stale, st)

	require.NoError(t, c.Start(ctx))
	require.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"))
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	// The postmaster is not our child, so we cannot wait(2) for it; poll
	// until it is gone or a zombie (bounded).
	for i := 0; i < 1000 && pgdev.ProcessAlive(pid); i++ {
		sleepBriefly()
	}
}

func TestNew_RejectsSocketDirTooLong(t *testing.T) {
	t.Parallel()
	long := "/" + strings.Repeat("d", 120)
	_, err := pgdev.New(pgdev.Config{DataDir: "/x", SocketDir: long}, pgdev.Binaries{}, nil)
	require.ErrorContains(t, err, "too long for a unix socket")
}

func TestSocketDirFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/work/p/.oml/run", pgdev.SocketDirFor("/work/p/.oml/run"))
	long := "/" + strings.Repeat("deep/", 30) + ".oml/run"
	got := pgdev.SocketDirFor(long)
	require.NotEqual(t, long, got)
	require.Less(t, len(got), 100)
	require.Equal(t, got, pgdev.SocketDirFor(long), "the fallback must be stable across invocations")
	require.NotEqual(t, got, pgdev.SocketDirFor(long+"2"))
}

func TestSocketURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://postgres@/oml?host=/a/b%20c/run&port=5432", pgdev.SocketURL("/a/b c/run", 5432, "postgres", "oml"))
	cfg, err := pgx.ParseConfig(pgdev.SocketURL("/a/b c/run", 5432, "postgres", "oml"))
	require.NoError(t, err)
	require.Equal(t, "/a/b c/run", cfg.Host)
	require.Equal(t, "oml", cfg.Database)
}

func TestFindBinaries_FindsAServer(t *testing.T) {
	t.Parallel()
	b, err := pgdev.FindBinaries(context.Background(), 0)
	require.NoError(t, err)
	require.Positive(t, b.Major)
	require.FileExists(t, b.Initdb())
	require.FileExists(t, b.PgCtl())
	require.FileExists(t, b.Postgres())
}

func TestCheckReach_AsRootNamesTheBlockingDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	t.Parallel()
	runner, err := pgdev.NewRunner(context.Background())
	require.NoError(t, err)
	dir := reachableTempDir(t)
	locked := filepath.Join(dir, "locked")
	require.NoError(t, os.Mkdir(locked, 0o700))
	require.NoError(t, runner.CheckReach(filepath.Join(dir, "data")))
	err = runner.CheckReach(filepath.Join(locked, "proj", ".oml", "pgdata"))
	require.ErrorContains(t, err, "cannot enter "+locked)
	require.ErrorContains(t, err, "chmod o+x "+locked)
}

func TestClusterStart_AsRootReownsADataDirectoryCopiedByRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, pgdev.Config{Unsafe: true})
	data := c.Config().DataDir
	require.NoError(t, filepath.Walk(data, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	}))
	require.NoError(t, os.Chmod(data, 0o755))
	require.NoError(t, c.Start(ctx))
	require.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"))
}

// Not parallel: it sets OML_PG_USER. A cluster initialised under another
// server user is stopped and restarted as that user later, without the
// variable, because the data directory's owner decides.
func TestRunnerFor_ExistingClusterRunsAsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no nobody user")
	}
	ctx := context.Background()
	bin, err := pgdev.FindBinaries(ctx, 0)
	require.NoError(t, err)
	dir := reachableTempDir(t)
	cfg := pgdev.Config{DataDir: filepath.Join(dir, "data"), SocketDir: filepath.Join(dir, "run"), Unsafe: true}

	t.Setenv(pgdev.EnvServiceUser, "nobody")
	runner, err := pgdev.NewRunner(ctx)
	require.NoError(t, err)
	require.Equal(t, "nobody", runner.User)
	c, err := pgdev.New(cfg, bin, runner)
	require.NoError(t, err)
	_, err = c.Init(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _, _ = c.Stop(context.Background(), pgdev.Immediate) })

	t.Setenv(pgdev.EnvServiceUser, "")
	runner, err = pgdev.RunnerFor(ctx, cfg.DataDir)
	require.NoError(t, err)
	require.Equal(t, "nobody", runner.User, "the owner of the data directory, not the default postgres user")
	c2, err := pgdev.New(cfg, bin, runner)
	require.NoError(t, err)
	was, err := c2.Stop(ctx, pgdev.Fast)
	require.NoError(t, err)
	require.True(t, was)
	require.NoError(t, c2.Start(ctx))
	require.Equal(t, "1", query(t, c2.URL("postgres"), "SELECT 1::text"))
}

package testdb_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testdb"
)

var defaultHookRuns atomic.Int32

func TestMain(m *testing.M) {
	testdb.Main(m,
		testdb.WithTemplate(func(ctx context.Context, conn *pgx.Conn) error {
			defaultHookRuns.Add(1)
			_, err := conn.Exec(ctx, `CREATE TABLE seeded (id int PRIMARY KEY, note text); INSERT INTO seeded VALUES (1, 'from the template')`)
			return err
		}),
		testdb.WithNamedTemplate("other", func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `CREATE TABLE other_table (x int)`)
			return err
		}),
	)
}

func scalar[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, conn.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func TestNew_DefaultTemplateContentIsPresent(t *testing.T) {
	t.Parallel()
	conn := testdb.New(t).Conn(t)
	require.Equal(t, "from the template", scalar[string](t, conn, "SELECT note FROM seeded WHERE id = 1"))
}

func TestNew_TwoDatabasesAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testdb.New(t), testdb.New(t)
	require.NotEqual(t, a.Name, b.Name)
	ca, cb := a.Conn(t), b.Conn(t)
	_, err := ca.Exec(ctx, "INSERT INTO seeded VALUES (2, 'only in a'); CREATE TABLE only_a (x int)")
	require.NoError(t, err)
	require.Equal(t, int64(2), scalar[int64](t, ca, "SELECT count(*) FROM seeded"))
	require.Equal(t, int64(1), scalar[int64](t, cb, "SELECT count(*) FROM seeded"))
	require.False(t, scalar[bool](t, cb, "SELECT to_regclass('only_a') IS NOT NULL"))
}

// Parallel tests writing the same key each see only their own row: every
// test's database is its own.
func TestNew_ParallelTestsDoNotSeeEachOther(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"first", "second", "third"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := testdb.New(t).Conn(t)
			_, err := conn.Exec(context.Background(), "INSERT INTO seeded VALUES (2, $1)", name)
			require.NoError(t, err)
			require.Equal(t, name, scalar[string](t, conn, "SELECT note FROM seeded WHERE id = 2"))
		})
	}
}

func TestNew_NamedAndEmptyTemplates(t *testing.T) {
	t.Parallel()
	other := testdb.New(t, testdb.Template("other")).Conn(t)
	require.True(t, scalar[bool](t, other, "SELECT to_regclass('other_table') IS NOT NULL"))
	require.False(t, scalar[bool](t, other, "SELECT to_regclass('seeded') IS NOT NULL"))

	empty := testdb.New(t, testdb.Empty()).Conn(t)
	require.Equal(t, int64(0), scalar[int64](t, empty, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
}

func TestNew_TemplateHookRunsOncePerBinary(t *testing.T) {
	t.Parallel()
	for range 3 {
		testdb.New(t)
	}
	require.Equal(t, int32(1), defaultHookRuns.Load())
}

func TestDB_PoolAndConnStringAsAnotherRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	pool := db.Pool(t)
	// Roles are cluster-wide (and the server may be shared): a random name.
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	role := "r_" + hex.EncodeToString(rnd[:])
	_, err := pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'pw'")
	require.NoError(t, err)
	other := testdb.OpenPool(t, db.ConnString(role, "pw"))
	var user, dbname string
	require.NoError(t, other.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&user, &dbname))
	require.Equal(t, role, user)
	require.Equal(t, db.Name, dbname)
}

func TestCluster_GivesClusterLevelAccess(t *testing.T) {
	t.Parallel()
	srv := testdb.Cluster(t)
	conn, err := pgx.Connect(context.Background(), srv.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.GreaterOrEqual(t, scalar[int](t, conn, "SELECT current_setting('max_connections')::int"), 200)
	if !srv.External() {
		require.DirExists(t, srv.Dir())
		require.Equal(t, "off", scalar[string](t, conn, "SHOW fsync"), "the throwaway cluster trades durability for speed")
	}
}

// The cleanup tests re-run this binary as a child (helperEnv selects what
// it does), read the cluster directory it prints, and check it is gone
// after the child ends: normally, by panic, and by SIGKILL.
const helperEnv = "OML_TESTDB_HELPER"

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper for the cleanup tests")
	}
	db := testdb.New(t)
	db.Conn(t)
	os.Stdout.WriteString("DIR=" + testdb.Cluster(t).Dir() + "\n")
	switch mode {
	case "panic":
		panic("deliberate panic to test cleanup")
	case "hang":
		select {}
	}
}

func TestCleanup_RemovesClusterDirectory(t *testing.T) {
	if os.Getenv(testdb.EnvDatabaseURL) != "" {
		t.Skip("no local cluster with " + testdb.EnvDatabaseURL)
	}
	t.Parallel()
	for _, mode := range []string{"pass", "panic", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			helperMode := mode
			if mode == "sigkill" {
				helperMode = "hang"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+helperMode)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			dir := ""
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "DIR="); ok {
					dir = d
					break
				}
			}
			require.NotEmpty(t, dir, "the helper never printed its cluster directory")
			require.DirExists(t, dir)
			if mode == "sigkill" {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			}
			go func() { _, _ = bufio.NewReader(out).WriteTo(devNull{}) }()
			waitErr := cmd.Wait()
			if mode == "pass" {
				require.NoError(t, waitErr)
				require.NoDirExists(t, dir, "Main must remove the directory before exiting")
				return
			}
			require.Error(t, waitErr)
			// The watchdog acts after the child is gone; wait for it (bounded).
			require.Eventually(t, func() bool {
				_, err := os.Stat(dir)
				return os.IsNotExist(err)
			}, 60*time.Second, 50*time.Millisecond, "the watchdog must remove %s", dir)
		})
	}
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// With OML_TEST_DATABASE_URL the harness uses that server and drops every
// database it made. The "external" server here is this binary's own cluster.
func TestExternalServer_DatabasesAreDroppedAtTheEnd(t *testing.T) {
	if os.Getenv(testdb.EnvDatabaseURL) != "" || os.Getenv(helperEnv) != "" {
		t.Skip("already running against an external server")
	}
	t.Parallel()
	srv := testdb.Cluster(t)
	cmd := exec.Command(os.Args[0], "-test.run=^(TestHelperProcess|TestNew_NamedAndEmptyTemplates|TestDB_PoolAndConnStringAsAnotherRole)$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=pass", testdb.EnvDatabaseURL+"="+srv.URL("postgres"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "DIR=\n", "no local cluster is started with an external server")

	conn, err := pgx.Connect(context.Background(), srv.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Equal(t, int64(0), scalar[int64](t, conn, "SELECT count(*) FROM pg_database WHERE datname LIKE 'oml\\_test\\_%'"))
}

// Many tests asking for a database at the same moment each get their own
// (concurrent clones of one template).
func TestNew_ManyConcurrentClones(t *testing.T) {
	t.Parallel()
	names := make(chan string, 12)
	t.Run("group", func(t *testing.T) {
		for i := range 12 {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				db := testdb.New(t)
				require.Equal(t, "from the template", scalar[string](t, db.Conn(t), "SELECT note FROM seeded WHERE id = 1"))
				names <- db.Name
			})
		}
	})
	close(names)
	seen := map[string]bool{}
	for n := range names {
		require.False(t, seen[n], "database %s handed out twice", n)
		seen[n] = true
	}
	require.Len(t, seen, 12)
}

func TestConfigure_TemplateRegisteredAfterTheClusterStarted(t *testing.T) {
	t.Parallel()
	testdb.Cluster(t) // make sure the server is up
	testdb.Configure(testdb.WithNamedTemplate("late", func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE TABLE late_table (x int)")
		return err
	}))
	conn := testdb.New(t, testdb.Template("late")).Conn(t)
	require.True(t, scalar[bool](t, conn, "SELECT to_regclass('late_table') IS NOT NULL"))
}

package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/pgdev"
)

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func TestRemoveStale_OnlyDirectoriesWhoseOwnerIsGone(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, dirPrefix+name)
		require.NoError(t, os.Mkdir(d, 0o755))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o644))
		}
		return d
	}
	dead := mk("dead", fmt.Sprintf("%d 1\n", deadPID(t)))
	start, err := procStartTime(os.Getpid())
	require.NoError(t, err)
	live := mk("live", fmt.Sprintf("%d %d\n", os.Getpid(), start))
	reused := mk("reused", fmt.Sprintf("%d %d\n", os.Getpid(), start+12345)) // our pid, another start time
	fresh := mk("fresh", "")
	old := mk("old", "")
	long := time.Now().Add(-2 * time.Minute)
	require.NoError(t, os.Chtimes(old, long, long))
	other := filepath.Join(tmp, "not-ours")
	require.NoError(t, os.Mkdir(other, 0o755))

	removeStale(context.Background(), tmp)

	require.NoDirExists(t, dead)
	require.DirExists(t, live)
	require.NoDirExists(t, reused)
	require.DirExists(t, fresh, "a directory too young to have its owner file yet is left alone")
	require.NoDirExists(t, old)
	require.DirExists(t, other)
}

// A binary killed together with its watchdog leaves a running postmaster;
// the next binary stops it and removes the directory.
func TestRemoveStale_StopsAnOrphanedPostmaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	dir := filepath.Join(tmp, dirPrefix+"orphan")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d 1\n", deadPID(t)), 0o644))
	bin, err := pgdev.FindBinaries(ctx, 0)
	require.NoError(t, err)
	runner, err := pgdev.NewRunner(ctx)
	require.NoError(t, err)
	c, err := pgdev.New(pgdev.Config{DataDir: filepath.Join(dir, "data"), SocketDir: filepath.Join(dir, "s"), Unsafe: true}, bin, runner)
	require.NoError(t, err)
	_, err = c.Init(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _, _ = c.Stop(ctx, pgdev.Immediate) })
	_, pf, err := c.Status()
	require.NoError(t, err)

	removeStale(ctx, tmp)

	require.NoDirExists(t, dir)
	require.False(t, pgdev.ProcessAlive(pf.PID), "the orphaned postmaster must be stopped")
}

func TestWithDatabase_RewritesURLAndKeywordForms(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://postgres@/t1?host=/a/b%20c&port=5432",
		withDatabase("postgres://postgres@/postgres?host=/a/b%20c&port=5432", "t1", "", ""))
	require.Equal(t, "postgres://app:s3cret@localhost:5433/t1?sslmode=disable",
		withDatabase("postgres://admin:pw@localhost:5433/postgres?sslmode=disable", "t1", "app", "s3cret"))
	require.Equal(t, "postgresql://app@h/t1",
		withDatabase("postgresql://h/postgres?user=admin&dbname=x", "t1", "app", ""))
	require.Equal(t, "host=/tmp port=5432 dbname='t1' user='o\\'b' password='p w'",
		withDatabase("host=/tmp port=5432", "t1", "o'b", "p w"))
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	require.Equal(t, "testfoo_bar_baz", sanitize("TestFoo/bar baz", 40))
	require.Equal(t, "abc", sanitize("ABC__", 3))
	require.LessOrEqual(t, len(sanitize(string(make([]byte, 100)), 40)), 40)
}

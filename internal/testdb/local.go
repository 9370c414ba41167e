package testdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/pgdev"
)

// dirPrefix names the per-binary cluster directories under the temp dir;
// stale ones are recognised (and removed) by it.
const dirPrefix = "oml-testdb-"

// ownerFile, inside a cluster directory, holds "PID STARTTIME" of the test
// binary that owns it.
const ownerFile = "owner"

type localCluster struct {
	dir      string
	cluster  *pgdev.Cluster
	watchdog *exec.Cmd
	// keepalive is the write end of the watchdog's stdin. Nothing is ever
	// written; the watchdog acts when it closes, i.e. when this process
	// exits. Held here so the garbage collector never closes it early.
	keepalive io.WriteCloser
}

// EnvDir names the directory that holds the per-binary cluster
// directories, overriding the choice made by baseDir.
const EnvDir = "OML_TESTDB_DIR"

// shmMinFree is how much free space /dev/shm needs before clusters go there.
const shmMinFree = 2 << 30

// baseDir picks where cluster directories go: $OML_TESTDB_DIR, else
// /dev/shm when it is a roomy tmpfs, else the temp dir. Memory-backed
// storage made database clones several times faster on a shared, busy disk
// (see docs/testing.md); the size check keeps small container /dev/shm
// mounts (64 MB by default in Docker) out of it.
func baseDir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && uint64(st.Bavail)*uint64(st.Bsize) >= shmMinFree {
		if f, err := os.CreateTemp("/dev/shm", ".oml-testdb-probe-"); err == nil {
			name := f.Name()
			_ = f.Close()
			_ = os.Remove(name)
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// maxBaseLen keeps BASE/oml-testdb-NNNNNNNNNN/s/.s.PGSQL.5432 inside the
// unix socket path limit; a longer base (macOS's TMPDIR) yields to /tmp.
const maxBaseLen = 55

func startLocal(ctx context.Context) (*server, error) {
	base := baseDir()
	if len(base) > maxBaseLen && os.Getenv(EnvDir) == "" {
		base = "/tmp"
	}
	seen := map[string]bool{}
	for _, d := range []string{base, os.TempDir(), "/dev/shm", "/tmp"} {
		if !seen[d] {
			seen[d] = true
			removeStale(ctx, d)
		}
	}

	bin, err := pgdev.FindBinaries(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("%w; run `make deps` (or scripts/ensure-postgres.sh), or set %s to use an existing server", err, EnvDatabaseURL)
	}
	runner, err := pgdev.NewRunner(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", base, err)
	}
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("cannot create the cluster directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	lc := &localCluster{dir: dir}
	if err := writeOwner(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := lc.startWatchdog(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	fail := func(err error) (*server, error) {
		_ = lc.remove(context.WithoutCancel(ctx))
		return nil, err
	}
	// The server user must be able to enter the directory (MkdirTemp makes
	// it 0700 for the caller).
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	c, err := pgdev.New(pgdev.Config{
		DataDir:        filepath.Join(dir, "data"),
		SocketDir:      filepath.Join(dir, "s"),
		Unsafe:         true,
		MaxConnections: 300,
		// Nothing replicates from a throwaway cluster; minimal WAL makes
		// the clones and bulk loads cheaper.
		Settings: map[string]string{"wal_level": "minimal", "max_wal_senders": "0"},
	}, bin, runner)
	if err != nil {
		return fail(err)
	}
	lc.cluster = c
	if _, err := c.Init(ctx); err != nil {
		return fail(err)
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	admin, err := pgconn.Open(ctx, c.URL("postgres"), pgconn.Options{ApplicationName: "oml-testdb", MaxConns: 8})
	if err != nil {
		return fail(err)
	}
	return &server{baseURL: c.URL("postgres"), admin: admin, local: lc}, nil
}

// remove stops the postmaster (immediate: the data is about to go) and
// deletes the directory, then lets the watchdog go.
func (lc *localCluster) remove(ctx context.Context) error {
	var errs []error
	if lc.cluster != nil {
		if _, err := lc.cluster.Stop(ctx, pgdev.Immediate); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(lc.dir); err != nil {
		errs = append(errs, fmt.Errorf("cannot remove %s: %w", lc.dir, err))
	}
	if lc.keepalive != nil {
		_ = lc.keepalive.Close()
		_ = lc.watchdog.Wait()
	}
	return errors.Join(errs...)
}

// watchdogScript runs in its own session. `cat` returns when the test
// binary (the only writer of its stdin) exits, however it exits; then it
// stops the postmaster(s) still running there (the shared cluster's data/,
// or each replication node's */data) and removes the directory.
const watchdogScript = `
cat >/dev/null
d=$1
alive() { kill -0 "$1" 2>/dev/null && ! grep -qs ') Z ' "/proc/$1/stat"; }
for data in "$d/data" "$d"/*/data; do
  [ -f "$data/postmaster.pid" ] || continue
  pid=$(head -n 1 "$data/postmaster.pid")
  if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$data" ]; then
    kill -QUIT "$pid" 2>/dev/null
    i=0
    while alive "$pid" && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  fi
done
rm -rf "$d"
`

func (lc *localCluster) startWatchdog() error {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "oml-testdb-watchdog", lc.dir)
	// Its own session: a Ctrl-C aimed at `go test` must not kill the one
	// process meant to clean up after it. No stdout/stderr: `go test` waits
	// for every holder of the binary's output pipe to exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start the cleanup watchdog: %w", err)
	}
	lc.watchdog, lc.keepalive = cmd, w
	return nil
}

func writeOwner(dir string) error {
	st, err := procStartTime(os.Getpid())
	if err != nil {
		st = 0
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %d\n", os.Getpid(), st), 0o644)
}

// procStartTime is field 22 of /proc/PID/stat (clock ticks since boot),
// which tells a live owner from an unrelated process that reused its pid.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ownerAlive reports whether the process recorded in dir/owner still runs.
func ownerAlive(dir string) (alive, known bool) {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscan(string(b), &pid, &start); err != nil {
		return false, false
	}
	if !pgdev.ProcessAlive(pid) {
		return false, true
	}
	if now, err := procStartTime(pid); err == nil && start != 0 && now != start {
		return false, true
	}
	return true, true
}

// removeStale deletes cluster directories left by test binaries that died
// with their watchdog (e.g. a reboot, or both killed together). A directory
// without an owner file is only touched once it is a minute old, in case
// its binary is between MkdirTemp and writing the file.
func removeStale(ctx context.Context, tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, dirPrefix+"*"))
	for _, d := range dirs {
		alive, known := ownerAlive(d)
		if alive {
			continue
		}
		if !known {
			if st, err := os.Stat(d); err != nil || time.Since(st.ModTime()) < time.Minute {
				continue
			}
		}
		datas, _ := filepath.Glob(filepath.Join(d, "*", "data"))
		for _, data := range append([]string{filepath.Join(d, "data")}, datas...) {
			if state, pf, _ := pgdev.StatusOf(data); state == pgdev.Running {
				_ = syscall.Kill(pf.PID, syscall.SIGQUIT)
				waitExit(ctx, pf.PID)
			}
		}
		_ = os.RemoveAll(d)
	}
}

// waitExit polls until pid has exited (it is not our child, so wait(2) is
// not available), for at most 30 seconds.
func waitExit(ctx context.Context, pid int) {
	deadline := time.Now().Add(30 * time.Second)
	for pgdev.ProcessAlive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
}

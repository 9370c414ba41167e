package pgdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PIDFile is what the postmaster writes to postmaster.pid in its data
// directory: one value per line, in this order (PostgreSQL 10 and later).
type PIDFile struct {
	PID        int
	DataDir    string
	StartTime  int64
	Port       int
	SocketDir  string
	ListenAddr string
	// Status is "starting", "stopping", "ready" or "standby".
	Status string
}

// ReadPIDFile parses dataDir/postmaster.pid. A missing file yields an error
// satisfying errors.Is(err, os.ErrNotExist).
func ReadPIDFile(dataDir string) (*PIDFile, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	get := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	pid, err := strconv.Atoi(get(0))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("%s/postmaster.pid does not start with a process id", dataDir)
	}
	pf := &PIDFile{PID: pid, DataDir: get(1), SocketDir: get(4), ListenAddr: get(5), Status: get(7)}
	pf.StartTime, _ = strconv.ParseInt(get(2), 10, 64)
	pf.Port, _ = strconv.Atoi(get(3))
	return pf, nil
}

// processAlive reports whether pid names a live process (one we may not be
// allowed to signal still counts). A zombie is dead: a killed postmaster is
// reparented to init, and a container's init may never reap it.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name, which may itself
	// contain ") ".
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// ProcessAlive is processAlive for other packages (the test harness).
func ProcessAlive(pid int) bool { return processAlive(pid) }

// isPostmasterOf reports whether pid is a live postmaster serving dataDir.
// The postmaster chdirs into its data directory, so /proc/PID/cwd names it;
// when /proc cannot be read (another user's process, no procfs) a live
// process named postgres is taken as the postmaster.
func isPostmasterOf(pid int, dataDir string) bool {
	if !processAlive(pid) {
		return false
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	if cwd, err := os.Readlink(filepath.Join(proc, "cwd")); err == nil {
		return sameDir(cwd, dataDir)
	}
	comm, err := os.ReadFile(filepath.Join(proc, "comm"))
	if err != nil {
		return !dirExists("/proc/self")
	}
	return strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres")
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// clusterProcesses lists live processes whose working directory is
// dataDir: a postmaster and all its children chdir there. After a
// postmaster is killed, its children linger until they notice, and a new
// postmaster must not start beside them (PostgreSQL refuses while they hold
// the old shared memory). Processes whose cwd cannot be read are skipped.
func clusterProcesses(dataDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !sameDir(cwd, dataDir) || !processAlive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// reapOrphans waits for the leftover processes of a dead postmaster to
// exit, nudging them with SIGQUIT (immediate exit, what the postmaster
// itself would send) after a grace period. It returns the pids that are
// still alive at the deadline.
func reapOrphans(ctx context.Context, dataDir string, grace, deadline time.Duration) []int {
	start := time.Now()
	nudged := false
	for {
		pids := clusterProcesses(dataDir)
		if len(pids) == 0 {
			return nil
		}
		elapsed := time.Since(start)
		if elapsed >= deadline || ctx.Err() != nil {
			return pids
		}
		if elapsed >= grace && !nudged {
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGQUIT)
			}
			nudged = true
		}
		// They are not our children, so there is nothing to wait(2) on.
		time.Sleep(20 * time.Millisecond)
	}
}

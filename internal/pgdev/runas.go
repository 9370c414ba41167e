package pgdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ServiceUserName is the system user oml creates to run PostgreSQL when the
// caller is root and no `postgres` user exists.
const ServiceUserName = "oml-postgres"

// EnvServiceUser overrides which existing user runs the server when oml runs
// as root.
const EnvServiceUser = "OML_PG_USER"

// Runner runs server programs as the right user. The zero value (nil
// Credential) runs them as the calling user, which is what happens when oml
// is not root.
type Runner struct {
	// User is the account the server runs as (informational).
	User string
	// Credential is set when the calling process is root.
	Credential *syscall.Credential
}

// NewRunner picks who runs the server: the caller when not root; otherwise
// $OML_PG_USER, else the `postgres` system user, else oml-postgres (created
// with useradd if missing).
func NewRunner(ctx context.Context) (*Runner, error) {
	if os.Geteuid() != 0 {
		name := strconv.Itoa(os.Geteuid())
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return &Runner{User: name}, nil
	}
	if name := os.Getenv(EnvServiceUser); name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("%s=%s names no user on this system: create it or unset %s", EnvServiceUser, name, EnvServiceUser)
		}
		return runnerFor(u)
	}
	if u, err := user.Lookup("postgres"); err == nil {
		return runnerFor(u)
	}
	u, err := user.Lookup(ServiceUserName)
	if err != nil {
		if err := createServiceUser(ctx); err != nil {
			return nil, err
		}
		if u, err = user.Lookup(ServiceUserName); err != nil {
			return nil, fmt.Errorf("created the system user %s but cannot look it up: %w", ServiceUserName, err)
		}
	}
	return runnerFor(u)
}

// RunnerFor is NewRunner for an existing cluster: when root, the server
// must run as the user that owns dataDir (whoever initialised it, perhaps
// under another OML_PG_USER), or pg_ctl cannot even read its pid file. A
// missing or root-owned dataDir, or OML_PG_USER set, falls back to
// NewRunner.
func RunnerFor(ctx context.Context, dataDir string) (*Runner, error) {
	if os.Geteuid() != 0 || os.Getenv(EnvServiceUser) != "" {
		// An explicit OML_PG_USER wins; Start re-owns the data directory.
		return NewRunner(ctx)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		return NewRunner(ctx)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == 0 {
		return NewRunner(ctx)
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(sys.Uid), 10))
	if err != nil {
		return nil, fmt.Errorf("%s belongs to uid %d, which names no user on this system; chown it to the user that should run PostgreSQL", dataDir, sys.Uid)
	}
	return runnerFor(u)
}

func createServiceUser(ctx context.Context) error {
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		return fmt.Errorf("PostgreSQL cannot run as root and there is no postgres user; create an unprivileged user and set %s to its name (useradd is not available here)", EnvServiceUser)
	}
	cmd := exec.CommandContext(ctx, useradd, "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
		"--comment", "oml private PostgreSQL", ServiceUserName)
	if out, err := cmd.CombinedOutput(); err != nil {
		if _, lerr := user.Lookup(ServiceUserName); lerr == nil {
			return nil // another oml created it at the same moment
		}
		return fmt.Errorf("cannot create the system user %s to run PostgreSQL (%v: %s); create an unprivileged user and set %s to its name", ServiceUserName, err, strings.TrimSpace(string(out)), EnvServiceUser)
	}
	return nil
}

func runnerFor(u *user.User) (*Runner, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s has a non-numeric uid %q", u.Username, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s has a non-numeric gid %q", u.Username, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s is root; PostgreSQL needs an unprivileged user", u.Username)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(g))
			}
		}
	}
	return &Runner{User: u.Username, Credential: cred}, nil
}

// Command builds a command that runs as the service user, with an
// environment scrubbed of PG* variables (PGDATA or PGPORT from the caller's
// shell must not redirect pg_ctl) and C messages so errors read the same
// everywhere. Its working directory is "/" because the caller's may not be
// readable by the service user.
func (r *Runner) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	other := r != nil && r.Credential != nil
	env := []string{"LC_ALL=C", "LANG=C"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" {
			continue
		}
		if other && (k == "HOME" || k == "USER" || k == "LOGNAME") {
			continue // root's, not the service user's
		}
		env = append(env, kv)
	}
	cmd.Env = env
	cmd.Dir = "/"
	if other {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.Credential}
		cmd.Env = append(cmd.Env, "USER="+r.User, "LOGNAME="+r.User, "HOME=/")
	}
	return cmd
}

// Chown gives path (not recursive) to the service user; a no-op when not root.
func (r *Runner) Chown(path string) error {
	if r == nil || r.Credential == nil {
		return nil
	}
	if err := os.Lchown(path, int(r.Credential.Uid), int(r.Credential.Gid)); err != nil {
		return fmt.Errorf("cannot give %s to the %s user: %w", path, r.User, err)
	}
	return nil
}

// ChownTree gives path and everything below it to the service user.
func (r *Runner) ChownTree(path string) error {
	if r == nil || r.Credential == nil {
		return nil
	}
	return filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return r.Chown(p)
	})
}

// OwnTree makes sure dir (a data directory) belongs to the service user
// with mode 0700, re-owning the whole tree only when dir itself belongs to
// someone else. A no-op when not root.
func (r *Runner) OwnTree(dir string) error {
	if r == nil || r.Credential == nil {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot inspect %s: %w", dir, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == r.Credential.Uid && st.Mode().Perm() == 0o700 {
		return nil
	}
	if err := r.ChownTree(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cannot set the mode of %s to 0700: %w", dir, err)
	}
	return nil
}

// MkdirPrivate creates dir (and missing parents, 0755) with mode 0700 for
// the service user. An existing dir is re-owned and tightened to 0700, which
// PostgreSQL insists on for data directories.
func (r *Runner) MkdirPrivate(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cannot set the mode of %s to 0700: %w", dir, err)
	}
	return r.Chown(dir)
}

// CheckReach returns an error naming the first directory on the way to path
// that the service user cannot search (execute permission), which would make
// initdb or postgres fail with a permission error. It reads mode bits, owner
// and group; ACLs are not consulted. A no-op when not root.
func (r *Runner) CheckReach(path string) error {
	if r == nil || r.Credential == nil {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var chain []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		d := chain[i]
		st, err := os.Stat(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // created later by us, 0755
			}
			return fmt.Errorf("cannot inspect %s: %w", d, err)
		}
		if !r.canSearch(st) {
			sys := st.Sys().(*syscall.Stat_t)
			owner := strconv.FormatUint(uint64(sys.Uid), 10)
			if u, err := user.LookupId(owner); err == nil {
				owner = u.Username
			}
			return fmt.Errorf("PostgreSQL must run as the unprivileged user %s (oml is running as root), but %s cannot enter %s (mode %04o, owner %s), so it cannot reach %s; run from a directory outside %s, or allow traversal with `chmod o+x %s`",
				r.User, r.User, d, st.Mode().Perm(), owner, abs, d, d)
		}
	}
	return nil
}

func (r *Runner) canSearch(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := st.Mode().Perm()
	c := r.Credential
	if sys.Uid == c.Uid {
		return perm&0o100 != 0
	}
	inGroup := sys.Gid == c.Gid
	for _, g := range c.Groups {
		inGroup = inGroup || g == sys.Gid
	}
	if inGroup {
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

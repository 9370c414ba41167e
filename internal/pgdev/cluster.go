package pgdev

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SuperUser is the bootstrap superuser initdb creates in every oml cluster,
// whatever OS user runs the server, so connection strings never depend on
// who started it.
const SuperUser = "postgres"

// DefaultPort names the unix socket (.s.PGSQL.5432) when TCP is off; the
// socket directory is private, so it never collides with another server.
const DefaultPort = 5432

// DefaultMaxConnections leaves room for concurrency tests with many pools.
const DefaultMaxConnections = 200

// maxSocketPath is sun_path's 108 bytes minus the NUL, with a margin.
const maxSocketPath = 100

// Config describes one private cluster.
type Config struct {
	// DataDir is the data directory (made absolute by New).
	DataDir string
	// SocketDir holds the unix socket; it must be short (see SocketDirFor)
	// and private to this cluster.
	SocketDir string
	// Port is the TCP port when TCP is set, else just the socket's name;
	// 0 means DefaultPort without TCP and a free port with TCP.
	Port int
	// TCP also listens on 127.0.0.1:Port.
	TCP bool
	// Unsafe turns fsync, synchronous_commit and full_page_writes off: fast,
	// and a crash can lose or corrupt data. Test clusters only.
	Unsafe bool
	// MaxConnections; 0 means DefaultMaxConnections.
	MaxConnections int
	// LogFile receives the server log; default DataDir/postgresql.log.
	LogFile string
	// Settings are extra postgresql.conf settings (name → raw value).
	Settings map[string]string
	// StartTimeout bounds pg_ctl -w start; default 60s.
	StartTimeout time.Duration
}

// Cluster is one private PostgreSQL cluster.
type Cluster struct {
	cfg    Config
	bin    Binaries
	runner *Runner
}

// New validates cfg and returns a handle; nothing is created yet.
func New(cfg Config, bin Binaries, runner *Runner) (*Cluster, error) {
	if cfg.DataDir == "" || cfg.SocketDir == "" {
		return nil, errors.New("pgdev: DataDir and SocketDir are required")
	}
	var err error
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, err
	}
	if cfg.SocketDir, err = filepath.Abs(cfg.SocketDir); err != nil {
		return nil, err
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(cfg.DataDir, "postgresql.log")
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if !cfg.TCP && cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if l := len(socketPath(cfg.SocketDir, 65535)); l > maxSocketPath {
		return nil, fmt.Errorf("the socket directory %s is too long for a unix socket (%d bytes, the limit is about 107); use a shorter path", cfg.SocketDir, l)
	}
	if runner == nil {
		runner = &Runner{}
	}
	return &Cluster{cfg: cfg, bin: bin, runner: runner}, nil
}

// Config returns the effective configuration (Port is final after Start).
func (c *Cluster) Config() Config { return c.cfg }

// Binaries returns the installation this cluster runs.
func (c *Cluster) Binaries() Binaries { return c.bin }

// Runner returns who runs the server.
func (c *Cluster) Runner() *Runner { return c.runner }

// Port is the port the server uses (the TCP port if TCP is on).
func (c *Cluster) Port() int { return c.cfg.Port }

func socketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// SocketDirFor returns preferred when a socket path in it fits the unix
// limit, else a short private directory under the system temp dir named
// after a hash of preferred (stable, so every oml invocation finds it).
func SocketDirFor(preferred string) string {
	if len(socketPath(preferred, 65535)) <= maxSocketPath {
		return preferred
	}
	sum := sha256.Sum256([]byte(preferred))
	name := "oml-sock-" + hex.EncodeToString(sum[:6])
	if d := filepath.Join(os.TempDir(), name); len(socketPath(d, 65535)) <= maxSocketPath {
		return d
	}
	return filepath.Join("/tmp", name)
}

// ReadDataMajor returns the major version recorded in dataDir/PG_VERSION, or
// 0 when the directory holds no cluster.
func ReadDataMajor(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// Initialized reports whether the data directory holds a cluster.
func (c *Cluster) Initialized() bool { return ReadDataMajor(c.cfg.DataDir) > 0 }

// Init runs initdb unless the data directory already holds a cluster, in
// which case it only checks that the binaries can run it. It returns whether
// it created the cluster.
func (c *Cluster) Init(ctx context.Context) (bool, error) {
	if major := ReadDataMajor(c.cfg.DataDir); major > 0 {
		if major != c.bin.Major {
			return false, fmt.Errorf("the data directory %s was created by PostgreSQL %d but the server binaries found are PostgreSQL %d (%s); install PostgreSQL %d or remove the directory", c.cfg.DataDir, major, c.bin.Major, c.bin.Dir, major)
		}
		return false, nil
	}
	if entries, err := os.ReadDir(c.cfg.DataDir); err == nil && len(entries) > 0 {
		return false, fmt.Errorf("%s exists, is not empty and holds no PostgreSQL cluster (no PG_VERSION); move it away or remove it", c.cfg.DataDir)
	}
	if err := c.runner.CheckReach(c.cfg.DataDir); err != nil {
		return false, err
	}
	if err := c.runner.MkdirPrivate(c.cfg.DataDir); err != nil {
		return false, err
	}
	args := []string{
		"-D", c.cfg.DataDir,
		"-U", SuperUser,
		"--encoding=UTF8", "--no-locale",
		"--auth-local=trust", "--auth-host=trust",
		"--no-instructions",
	}
	if c.cfg.Unsafe {
		args = append(args, "--no-sync")
	}
	if out, err := c.run(ctx, c.bin.Initdb(), args...); err != nil {
		return false, fmt.Errorf("initdb failed for %s (%v): %s", c.cfg.DataDir, err, errorLines(out, 3))
	}
	conf := filepath.Join(c.cfg.DataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return false, fmt.Errorf("cannot extend %s: %w", conf, err)
	}
	_, err = f.WriteString("\n# Settings managed by oml (rewritten before every start).\ninclude_if_exists = 'oml.conf'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("cannot extend %s: %w", conf, err)
	}
	return true, nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := c.runner.Command(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// State is what Status found.
type State int

const (
	// Stopped: no postmaster.pid.
	Stopped State = iota
	// Running: a live postmaster serves this data directory.
	Running
	// Stale: postmaster.pid names a process that is gone or is not this
	// cluster's postmaster (a killed run).
	Stale
)

func (s State) String() string {
	return [...]string{"stopped", "running", "stale"}[s]
}

// Status reports whether the cluster's postmaster is running. The pid file
// is returned for Running and Stale.
func (c *Cluster) Status() (State, *PIDFile, error) {
	return StatusOf(c.cfg.DataDir)
}

// StatusOf is Status for a data directory without a Cluster handle.
func StatusOf(dataDir string) (State, *PIDFile, error) {
	pf, err := ReadPIDFile(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return Stopped, nil, nil
	}
	if err != nil {
		return Stale, nil, err
	}
	if isPostmasterOf(pf.PID, dataDir) {
		return Running, pf, nil
	}
	return Stale, pf, nil
}

// ErrRunning is returned by Start when the cluster is already up.
var ErrRunning = errors.New("the cluster is already running")

// Start writes oml.conf and starts the server with pg_ctl -w, which returns
// once it accepts connections. A stale postmaster.pid and stale socket
// files from a killed run are removed first.
func (c *Cluster) Start(ctx context.Context) error {
	state, _, _ := c.Status()
	switch state {
	case Running:
		return ErrRunning
	case Stale:
		// A killed postmaster's children outlive it briefly; starting
		// beside them would fail (PostgreSQL guards its shared memory).
		if left := reapOrphans(ctx, c.cfg.DataDir, 3*time.Second, 10*time.Second); len(left) > 0 {
			return fmt.Errorf("processes %v of an earlier server still use %s and did not exit; stop them (kill -QUIT) and try again", left, c.cfg.DataDir)
		}
		if err := os.Remove(filepath.Join(c.cfg.DataDir, "postmaster.pid")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cannot remove the stale %s/postmaster.pid: %w", c.cfg.DataDir, err)
		}
	}
	if !c.Initialized() {
		return fmt.Errorf("%s holds no PostgreSQL cluster; initialise it first", c.cfg.DataDir)
	}
	if err := c.runner.CheckReach(c.cfg.DataDir); err != nil {
		return err
	}
	// A data directory copied or restored by root would make the server
	// refuse to start ("wrong ownership"); hand it back to the server user.
	if err := c.runner.OwnTree(c.cfg.DataDir); err != nil {
		return err
	}
	if err := c.runner.CheckReach(c.cfg.SocketDir); err != nil {
		return err
	}
	if err := c.runner.MkdirPrivate(c.cfg.SocketDir); err != nil {
		return err
	}
	// The socket directory is private to this cluster and no server of it
	// runs, so any socket or lock file in it is stale; PostgreSQL would
	// refuse a lock file whose pid now belongs to another process.
	if old, _ := filepath.Glob(filepath.Join(c.cfg.SocketDir, ".s.PGSQL.*")); len(old) > 0 {
		for _, p := range old {
			_ = os.Remove(p)
		}
	}
	auto := c.cfg.TCP && c.cfg.Port == 0
	for attempt := 1; ; attempt++ {
		if auto {
			p, err := freePort()
			if err != nil {
				return err
			}
			c.cfg.Port = p
		}
		err := c.startOnce(ctx)
		if err == nil || !auto || attempt == 3 || ctx.Err() != nil {
			return err
		}
	}
}

func (c *Cluster) startOnce(ctx context.Context) error {
	if err := c.writeConf(); err != nil {
		return err
	}
	if c.cfg.LogFile != filepath.Join(c.cfg.DataDir, "postgresql.log") {
		if err := c.runner.CheckReach(c.cfg.LogFile); err != nil {
			return err
		}
	}
	logStart := fileSize(c.cfg.LogFile)
	timeout := strconv.Itoa(int(c.cfg.StartTimeout / time.Second))
	out, err := c.run(ctx, c.bin.PgCtl(), "start", "-w", "-t", timeout, "-s", "-D", c.cfg.DataDir, "-l", c.cfg.LogFile)
	if err != nil {
		msg := errorLines(out, 3)
		if tail := logTail(c.cfg.LogFile, logStart, 4); tail != "" {
			msg += "; server log: " + tail
		}
		return fmt.Errorf("PostgreSQL did not start (pg_ctl: %v): %s; full log in %s", err, msg, c.cfg.LogFile)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free TCP port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logTail returns the last n non-empty lines written to path after offset.
func logTail(path string, offset int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return errorLines(string(b[offset:]), n)
}

// writeConf renders oml.conf: the settings that depend on how this start
// was asked for (socket, port, durability), owned by the service user.
func (c *Cluster) writeConf() error {
	set := map[string]string{
		"listen_addresses":        quote(""),
		"port":                    strconv.Itoa(c.cfg.Port),
		"unix_socket_directories": quote(c.cfg.SocketDir),
		"unix_socket_permissions": "0700",
		"max_connections":         strconv.Itoa(c.cfg.MaxConnections),
		"fsync":                   "on",
		"synchronous_commit":      "on",
		"full_page_writes":        "on",
		"log_line_prefix":         quote("%m [%p] %q%u@%d "),
		"timezone":                quote("UTC"),
	}
	if c.cfg.TCP {
		set["listen_addresses"] = quote("127.0.0.1")
	}
	if c.cfg.Unsafe {
		set["fsync"], set["synchronous_commit"], set["full_page_writes"] = "off", "off", "off"
	}
	for k, v := range c.cfg.Settings {
		set[k] = v
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Written by oml before every start; changes here are overwritten.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, set[k])
	}
	p := filepath.Join(c.cfg.DataDir, "oml.conf")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	return c.runner.Chown(p)
}

// quote renders a postgresql.conf string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// StopMode is pg_ctl's shutdown mode.
type StopMode string

const (
	// Fast rolls back open transactions and shuts down cleanly.
	Fast StopMode = "fast"
	// Immediate aborts without a shutdown checkpoint (crash recovery on the
	// next start); for throwaway clusters about to be deleted.
	Immediate StopMode = "immediate"
)

// Stop shuts the server down and waits for it to exit. It reports whether a
// server was running; a stale pid file is removed and is not an error.
func (c *Cluster) Stop(ctx context.Context, mode StopMode) (bool, error) {
	state, _, _ := c.Status()
	switch state {
	case Stopped:
		return false, nil
	case Stale:
		_ = os.Remove(filepath.Join(c.cfg.DataDir, "postmaster.pid"))
		return false, nil
	}
	out, err := c.run(ctx, c.bin.PgCtl(), "stop", "-w", "-t", "60", "-s", "-m", string(mode), "-D", c.cfg.DataDir)
	if err != nil {
		if st, _, _ := c.Status(); st != Running {
			return true, nil
		}
		return true, fmt.Errorf("pg_ctl stop failed for %s (%v): %s", c.cfg.DataDir, err, errorLines(out, 3))
	}
	return true, nil
}

// URL is a connection string for database db as the superuser over the
// unix socket. Trust authentication means it carries no password.
func (c *Cluster) URL(db string) string {
	return SocketURL(c.cfg.SocketDir, c.cfg.Port, SuperUser, db)
}

// TCPURL is the same over 127.0.0.1; empty when TCP is off.
func (c *Cluster) TCPURL(db string) string {
	if !c.cfg.TCP {
		return ""
	}
	u := url.URL{Scheme: "postgres", User: url.User(SuperUser), Host: "127.0.0.1:" + strconv.Itoa(c.cfg.Port), Path: "/" + db}
	return u.String()
}

// SocketURL builds postgres://user@/db?host=DIR&port=N. The directory is
// query-escaped except for its slashes, which stay readable.
func SocketURL(socketDir string, port int, user, db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(user), Path: "/" + db}
	host := strings.NewReplacer("%2F", "/", "+", "%20").Replace(url.QueryEscape(socketDir))
	return u.String() + "?host=" + host + "&port=" + strconv.Itoa(port)
}

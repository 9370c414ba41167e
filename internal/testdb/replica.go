package testdb

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/pgdev"
)

// Replication tests need a cluster of their own: the shared per-binary
// cluster runs with wal_level = minimal (cheap clones) and must never be
// promoted, stopped or crashed under the other tests. A Node is one such
// private cluster (a primary, a streaming standby, or a point-in-time
// restore), in a directory named oml-testdb-* so the stale-directory sweep
// and a watchdog clean it up like the shared one.

// Node is one private PostgreSQL cluster started for a replication test.
type Node struct {
	Name string // "primary", "standby", "restore" ...

	c   *pgdev.Cluster
	bin pgdev.Binaries
	dir string // the node's own directory (data/ and s/ inside)
}

// nodeSeq numbers nodes so parallel tests never share a directory name.
var nodeSeq atomic.Int64

// replicaSettings make a cluster a usable primary (or standby) while
// keeping it cheap: fsync off (nothing survives the test), but
// synchronous_commit on so a commit that returned is in the primary's WAL,
// which is what the standby streams.
func replicaSettings() map[string]string {
	return map[string]string{
		"wal_level":        "replica",
		"max_wal_senders":  "5",
		"hot_standby":      "on",
		"fsync":            "off",
		"full_page_writes": "off",
		// A stopped standby must be noticed soon by pg_stat_replication
		// (tests of the durability fence), not after the 60 s default.
		"wal_sender_timeout":   "5s",
		"wal_receiver_timeout": "5s",
		"shared_buffers":       "16MB",
	}
}

// pairBase holds the directories of every node this binary starts, with a
// watchdog that stops their postmasters if the binary dies.
type pairBase struct {
	dir string
	lc  *localCluster
}

var (
	replMu   sync.Mutex
	replBase *pairBase
)

// replicaBase returns the directory under which this binary's replication
// nodes live, starting its watchdog on first use.
func replicaBase() (*pairBase, error) {
	replMu.Lock()
	defer replMu.Unlock()
	if replBase != nil {
		return replBase, nil
	}
	{
		base := baseDir()
		if len(base) > maxBaseLen && os.Getenv(EnvDir) == "" {
			base = "/tmp"
		}
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(base, dirPrefix+"repl-")
		if err != nil {
			return nil, fmt.Errorf("cannot create the replication test directory: %w", err)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := writeOwner(dir); err != nil {
			return nil, err
		}
		lc := &localCluster{dir: dir}
		if err := lc.startWatchdog(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		replBase = &pairBase{dir: dir, lc: lc}
		return replBase, nil
	}
}

// newNode prepares (but does not initialise) a node directory.
func newNode(t testing.TB, name string) *Node {
	t.Helper()
	ctx := context.Background()
	pb, err := replicaBase()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	bin, err := pgdev.FindBinaries(ctx, 0)
	if err != nil {
		t.Fatalf("testdb: %v; run `make deps` (or scripts/ensure-postgres.sh)", err)
	}
	runner, err := pgdev.NewRunner(ctx)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	dir := filepath.Join(pb.dir, fmt.Sprintf("n%d", nodeSeq.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	c, err := pgdev.New(pgdev.Config{
		DataDir:        filepath.Join(dir, "data"),
		SocketDir:      filepath.Join(dir, "s"),
		MaxConnections: 100,
		Settings:       replicaSettings(),
	}, bin, runner)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	n := &Node{Name: name, c: c, bin: bin, dir: dir}
	t.Cleanup(func() {
		_, _ = n.c.Stop(context.Background(), pgdev.Immediate)
		_ = os.RemoveAll(dir)
	})
	return n
}

// NewPrimary starts a private cluster that can be streamed from
// (wal_level = replica, a `local replication` trust line in pg_hba.conf).
// It is stopped and deleted when the test ends.
func NewPrimary(t testing.TB) *Node {
	t.Helper()
	ctx := context.Background()
	n := newNode(t, "primary")
	if _, err := n.c.Init(ctx); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	hba := filepath.Join(n.c.Config().DataDir, "pg_hba.conf")
	f, err := os.OpenFile(hba, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// initdb's default file has it too; say it explicitly, a standby
	// depends on it.
	_, err = f.WriteString("\nlocal replication all trust\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("testdb: cannot extend %s: %v", hba, err)
	}
	if err := n.c.Start(ctx); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return n
}

// URL connects to database db on the node as the superuser.
func (n *Node) URL(db string) string { return n.c.URL(db) }

// SocketDir is the directory of the node's unix socket (a connection's
// host), for tests that move "the database" from one node to another the
// way a virtual IP moves in a failover.
func (n *Node) SocketDir() string { return n.c.Config().SocketDir }

// Dir is the node's data directory.
func (n *Node) Dir() string { return n.c.Config().DataDir }

// Start starts a stopped node (a standby resumes replaying what it has).
func (n *Node) Start(t testing.TB) {
	t.Helper()
	if err := n.c.Start(context.Background()); err != nil {
		t.Fatalf("testdb: start %s: %v", n.Name, err)
	}
}

// Stop shuts the node down: pgdev.Fast (clean) or pgdev.Immediate (as if
// the machine died: no shutdown checkpoint, nothing more is streamed).
func (n *Node) Stop(t testing.TB, mode pgdev.StopMode) {
	t.Helper()
	if _, err := n.c.Stop(context.Background(), mode); err != nil {
		t.Fatalf("testdb: stop %s: %v", n.Name, err)
	}
}

// Promote ends recovery on a standby (pg_ctl promote -w) and waits until it
// accepts writes; it is then a primary on a new timeline.
func (n *Node) Promote(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	cmd := n.c.Runner().Command(ctx, filepath.Join(n.bin.Dir, "pg_ctl"), "promote", "-w", "-t", "60", "-D", n.Dir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("testdb: pg_ctl promote %s: %v: %s", n.Name, err, out.String())
	}
	n.waitWritable(t)
}

func (n *Node) waitWritable(t testing.TB) {
	t.Helper()
	n.poll(t, "the end of recovery", func(conn *pgx.Conn) (bool, error) {
		var inRecovery bool
		err := conn.QueryRow(context.Background(), "SELECT pg_is_in_recovery()").Scan(&inRecovery)
		return !inRecovery, err
	})
}

// poll runs cond on a fresh connection to "postgres" until it reports true
// (at most a minute). Polling is how one waits for a server's state; it is
// not a timing assertion.
func (n *Node) poll(t testing.TB, what string, cond func(*pgx.Conn) (bool, error)) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		conn, err := pgx.Connect(ctx, n.URL("postgres"))
		if err == nil {
			ok, cerr := cond(conn)
			_ = conn.Close(ctx)
			if cerr == nil && ok {
				return
			}
			last = cerr
		} else {
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("testdb: %s: waited a minute for %s (last error: %v)", n.Name, what, last)
}

// StartStandby makes a streaming standby of primary: pg_basebackup -R -X
// stream into a new directory, then start it and wait until the primary
// lists it as streaming with a flush position reported.
func StartStandby(t testing.TB, primary *Node) *Node {
	t.Helper()
	n := newNode(t, "standby")
	n.baseBackup(t, primary, true)
	n.Start(t)
	primary.poll(t, "the standby to stream", func(conn *pgx.Conn) (bool, error) {
		var k int
		// Streaming and has reported a flush position: until its first
		// reply flush_lsn is NULL, and oml does not count such a standby.
		err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND flush_lsn IS NOT NULL").Scan(&k)
		return k > 0, err
	})
	return n
}

// baseBackup copies primary into n's data directory with pg_basebackup
// (-X stream: the WAL to make it consistent comes along), as a standby
// (-R: standby.signal and primary_conninfo) when standby is set.
func (n *Node) baseBackup(t testing.TB, primary *Node, standby bool) {
	t.Helper()
	ctx := context.Background()
	r := n.c.Runner()
	if err := r.MkdirPrivate(n.Dir()); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	pc := primary.c.Config()
	args := []string{"-h", pc.SocketDir, "-p", strconv.Itoa(pc.Port), "-U", pgdev.SuperUser,
		"-D", n.Dir(), "-X", "stream", "-c", "fast", "--no-sync"}
	if standby {
		args = append(args, "-R")
	}
	cmd := r.Command(ctx, filepath.Join(n.bin.Dir, "pg_basebackup"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("testdb: pg_basebackup of %s: %v: %s", primary.Name, err, out.String())
	}
}

// WaitReplayed waits until standby has replayed everything primary has
// written so far (pg_last_wal_replay_lsn ≥ the primary's
// pg_current_wal_lsn at the time of the call).
func WaitReplayed(t testing.TB, primary, standby *Node) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	var lsn string
	err = conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	standby.poll(t, "replay to reach "+lsn, func(c *pgx.Conn) (bool, error) {
		var ok bool
		err := c.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&ok)
		return ok, err
	})
}

// LoseTail stages the failover that loses a tail: wait until standby has
// replayed everything, stop it, run lost (which writes on the primary:
// these writes are the tail the standby never sees), crash the primary
// (stop -m immediate), start the standby again (it replays only what it
// had) and promote it. It returns the standby, now the primary on a new
// timeline; the old primary stays stopped.
func LoseTail(t testing.TB, primary, standby *Node, lost func()) *Node {
	t.Helper()
	WaitReplayed(t, primary, standby)
	standby.Stop(t, pgdev.Fast)
	lost()
	primary.Stop(t, pgdev.Immediate)
	standby.Start(t)
	standby.Promote(t)
	return standby
}

// BaseBackup is a copy of a primary taken with pg_basebackup, to be started
// later as a point-in-time restore (see Restore).
type BaseBackup struct{ n *Node }

// TakeBaseBackup copies primary now (not a standby: no -R).
func TakeBaseBackup(t testing.TB, primary *Node) *BaseBackup {
	t.Helper()
	n := newNode(t, "restore")
	n.baseBackup(t, primary, false)
	return &BaseBackup{n: n}
}

// Restore starts the backup as a point-in-time restore to the moment the
// backup ended: targeted recovery (recovery.signal, recovery_target =
// 'immediate', no archive) that promotes when it gets there. The result
// has the primary's system identifier, a new timeline, and none of what the
// primary wrote after the backup — a database behind anything derived from
// the primary since. The backup can be restored once.
func (b *BaseBackup) Restore(t testing.TB) *Node {
	t.Helper()
	n := b.n
	auto := filepath.Join(n.Dir(), "postgresql.auto.conf")
	f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	_, err = f.WriteString("\nrestore_command = '/bin/false'\nrecovery_target = 'immediate'\nrecovery_target_action = 'promote'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := os.WriteFile(filepath.Join(n.Dir(), "recovery.signal"), nil, 0o600); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := n.c.Runner().ChownTree(n.Dir()); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	n.Start(t)
	n.waitWritable(t)
	return n
}

// CreateDatabase creates database name on a primary and runs hook in it
// (for example schema.Migrate); it returns the database's URL.
func (n *Node) CreateDatabase(t testing.TB, name string, hook Hook) string {
	t.Helper()
	ctx := context.Background()
	if _, err := pgdev.EnsureDatabase(ctx, n.URL("postgres"), name); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if hook != nil {
		conn, err := pgx.Connect(ctx, n.URL(name))
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
		herr := hook(ctx, conn)
		_ = conn.Close(ctx)
		if herr != nil {
			t.Fatalf("testdb: preparing %s on %s: %v", name, n.Name, herr)
		}
	}
	return n.URL(name)
}

// Identity is what tells PostgreSQL histories apart: the cluster's system
// identifier (kept by a standby, a promotion and a restore of a base
// backup) and its current timeline (one more after every promotion).
type Identity struct {
	SystemIdentifier string
	Timeline         int64
}

// Identity reads the node's system identifier and timeline (from
// pg_control_system and pg_control_checkpoint; on a promoted node after
// the end-of-recovery checkpoint, which Promote's -w waits for).
func (n *Node) Identity(t testing.TB) Identity {
	t.Helper()
	ctx := context.Background()
	pool, err := pgconn.Open(ctx, n.URL("postgres"), pgconn.Options{ApplicationName: "oml-testdb"})
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer pool.Close()
	var id Identity
	var tli string
	err = pool.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()),
       CASE WHEN pg_is_in_recovery() THEN lpad(to_hex((SELECT timeline_id FROM pg_control_checkpoint())), 8, '0')
            ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END`).Scan(&id.SystemIdentifier, &tli)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// pg_walfile_name's first 8 hex digits are the timeline.
	v, err := strconv.ParseInt(tli, 16, 64)
	if err != nil {
		t.Fatalf("testdb: cannot read the timeline from %q: %v", tli, err)
	}
	id.Timeline = v
	return id
}

package e2e_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/testdb"
)

type jkey struct {
	tenant uuid.UUID
	seq    int64
}

// journalOf reads every (tenant, seq) -> "hash event_type" of the database
// at url.
func journalOf(t *testing.T, url string) map[jkey]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tenant_id, seq, hash, event_type FROM oml.journal`)
	require.NoError(t, err)
	out := map[jkey]string{}
	for rows.Next() {
		var k jkey
		var h []byte
		var typ string
		require.NoError(t, rows.Scan(&k.tenant, &k.seq, &h, &typ))
		out[k] = hex.EncodeToString(h) + " " + typ
	}
	require.NoError(t, rows.Err())
	return out
}

// A point-in-time restore (same system identifier, a new timeline, the
// database behind the lake), all through the command line: the drain
// refuses (exit 1) and doctor fails its continuity check without --deep;
// `oml chain restore-tail` — killed once (SIGKILL, the real binary) while a
// tenant's restore transaction is open, then run again — brings the journal
// back event for event (every tenant, seq and hash the old primary had, plus
// one chain.tail_restored per restored chain); the drain proceeds; verify,
// reconcile and doctor are clean, and every tenant's bronze holds exactly
// its journal.
func TestFailover_PointInTimeRestore_RestoreTailCrashedAndReRun_LakeEqualsJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, primary := privateDeployment(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "10", "--seed", "41")
	e.ok(t, "lake", "drain", "--once")
	backup := testdb.TakeBaseBackup(t, primary)
	e.ok(t, "tenant", "create", "late")
	e.ok(t, "dev", "load", "--tenants", "3", "--claims", "15", "--seed", "42")
	e.ok(t, "lake", "drain", "--once")
	old := journalOf(t, e[cliutil.EnvDatabaseURL])
	restored := backup.Restore(t)
	url := restored.URL("oml")
	e[cliutil.EnvDatabaseURL] = url
	before := journalOf(t, url)
	require.Less(t, len(before), len(old), "the restore is behind")

	r := e.run(t, "lake", "drain", "--once")
	require.Equalf(t, cliutil.ExitFindings, r.code, "stderr %s", r.stderr)
	require.Contains(t, r.stderr, "the lake is ahead of the database")
	code, c := e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code, "doctor fails without --deep")
	data := c["data"].(map[string]any)
	require.Equal(t, "lake-ahead", data["state"])
	require.Equal(t, data["lake_system_identifier"], data["database_system_identifier"])
	require.Greater(t, data["database_timeline"], data["lake_timeline"])

	// The crash: one tenant's chain lock is held here, so restore-tail
	// (after the provider chain) waits inside that tenant's transaction; the
	// process is killed there.
	var victim uuid.UUID
	for k := range old {
		if _, ok := before[k]; !ok && k.tenant != journal.ProviderTenant {
			victim = k.tenant
			break
		}
	}
	require.NotEqual(t, uuid.Nil, victim)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// pg_stat_activity is read from a connection of its own: inside the
	// lock's transaction it would be one snapshot.
	watch, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer watch.Close(ctx)
	lock, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, chain.LockClass, chain.TenantLockKey(victim))
	require.NoError(t, err)
	cmd := exec.Command(omlBinary(t), "chain", "restore-tail", "--yes")
	cmd.Env = e.environ()
	var cout, cerr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &cout, &cerr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var pid int32
	waitFor(t, "restore-tail to wait for the chain lock of tenant "+victim.String(), func() bool {
		select {
		case <-exited:
			t.Fatalf("restore-tail ended before it reached the lock: stdout %s stderr %s", cout.String(), cerr.String())
		default:
		}
		err := watch.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
		  WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`).Scan(&pid)
		return err == nil
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	require.NoError(t, lock.Rollback(ctx))
	waitFor(t, "the killed restore's backend to end", func() bool {
		var n int
		require.NoError(t, watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n))
		return n == 0
	})
	mid := journalOf(t, url)
	for k, h := range mid {
		if k.tenant == victim {
			require.Equal(t, before[k], h, "the killed restore left nothing on tenant %s", victim)
		}
	}
	for k := range before {
		require.Contains(t, mid, k)
	}
	for k := range mid {
		if _, ok := before[k]; !ok {
			require.NotEqual(t, victim, k.tenant)
		}
	}

	// The re-run restores everything.
	requireRestoreTailBringsBackTheJournal(t, e, old)
}

// requireRestoreTailBringsBackTheJournal runs `oml chain restore-tail
// --yes` and checks the journal equals old (the lost primary's) event for
// event plus chain.tail_restored events; then the drain proceeds, chain
// verify, reconcile and doctor's continuity check are clean, and every
// tenant's bronze holds exactly its journal (same seqs and hashes, no
// duplicate).
func requireRestoreTailBringsBackTheJournal(t *testing.T, e env, old map[jkey]string) {
	t.Helper()
	ctx := context.Background()
	url := e[cliutil.EnvDatabaseURL]
	out := e.ok(t, "chain", "restore-tail", "--yes")
	require.Contains(t, out, "restored")
	now := journalOf(t, url)
	for k, h := range old {
		require.Equal(t, h, now[k], "tenant %s seq %d", k.tenant, k.seq)
	}
	for k, h := range now {
		if _, ok := old[k]; !ok {
			require.Contains(t, h, string(journal.TypeChainTailRestored), "tenant %s seq %d is new", k.tenant, k.seq)
		}
	}

	e.ok(t, "lake", "drain", "--once")
	e.ok(t, "chain", "verify")
	e.ok(t, "reconcile")
	code, c := e.doctorCheck(t, "continuity")
	require.Equal(t, "ok", c["status"], "%v", c)
	require.NotEqual(t, cliutil.ExitFindings, code)

	lake, err := store.Open(ctx, e[cliutil.EnvLakeURL])
	require.NoError(t, err)
	final := journalOf(t, url)
	tenants := map[uuid.UUID]bool{}
	for k := range final {
		tenants[k.tenant] = true
	}
	for tn := range tenants {
		evs, err := bronze.Events(ctx, lake, tn, 1)
		require.NoError(t, err)
		got := map[int64]string{}
		for _, ev := range evs {
			_, dup := got[ev.Seq]
			require.False(t, dup, "tenant %s seq %d twice in bronze", tn, ev.Seq)
			got[ev.Seq] = hex.EncodeToString(ev.Hash) + " " + ev.EventType
		}
		want := map[int64]string{}
		for k, h := range final {
			if k.tenant == tn {
				want[k.seq] = h
			}
		}
		require.Equal(t, want, got, "tenant %s", tn)
	}
}

// The standby promoted after losing a tail the lake drained past the newest
// witness (the lost tail was drained without a key), through the command
// line: the first drain refuses and doctor fails without --deep;
// restore-tail brings the journal back; the lake equals the journal.
func TestFailover_PromotedStandbyLostTail_RestoreTailThroughCLI_LakeEqualsJournal(t *testing.T) {
	t.Parallel()
	e := newFailoverEnv(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "10", "--seed", "51")
	e.ok(t, "lake", "drain", "--once")
	var old map[jkey]string
	promoted := testdb.LoseTail(t, e.primary, e.standby, func() {
		e.ok(t, "tenant", "create", "late")
		e.ok(t, "dev", "load", "--tenants", "3", "--claims", "15", "--seed", "52")
		noKey := env{}
		for k, v := range e.env {
			noKey[k] = v
		}
		delete(noKey, cliutil.EnvSigningKeyFile) // no witness covers the tail
		noKey.ok(t, "lake", "drain", "--once")
		old = journalOf(t, e.env[cliutil.EnvDatabaseURL])
	})
	e.env[cliutil.EnvDatabaseURL] = promoted.URL("oml")

	r := e.run(t, "lake", "drain", "--once")
	require.Equalf(t, cliutil.ExitFindings, r.code, "stderr %s", r.stderr)
	code, c := e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code, "doctor fails without --deep")
	require.Equal(t, "lake-ahead", c["data"].(map[string]any)["state"])
	requireRestoreTailBringsBackTheJournal(t, e.env, old)
}

// waitFor polls a state (never a timing claim) for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

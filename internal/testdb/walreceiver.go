package testdb

import (
	"context"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// StopWALReceiver freezes a standby's WAL receiver process (SIGSTOP): the
// standby stays connected and listed as streaming on the primary (until
// the primary's wal_sender_timeout), but flushes nothing more — the
// standby that falls behind, for tests of what waits for it. The returned
// function resumes it (SIGCONT); it also runs when the test ends.
func StopWALReceiver(t testing.TB, standby *Node) (resume func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	var pid int
	err = conn.QueryRow(ctx, `SELECT pid FROM pg_stat_wal_receiver`).Scan(&pid)
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatalf("testdb: find the WAL receiver of %s: %v", standby.Name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testdb: stop the WAL receiver (pid %d): %v", pid, err)
	}
	stopped := true
	resume = func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("testdb: resume the WAL receiver (pid %d): %v", pid, err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}

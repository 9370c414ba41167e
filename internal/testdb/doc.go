// Package testdb gives every database test in oml a real, private
// PostgreSQL database, fast, and leaves nothing behind.
//
// Shape:
//
//	func TestMain(m *testing.M) {
//		testdb.Main(m, testdb.WithTemplate(schema.Migrate))
//	}
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		db := testdb.New(t)   // a fresh database cloned from the migrated template
//		pool := db.Pool(t)    // closed in t.Cleanup
//		...
//	}
//
// Main (or Run, which returns the exit code instead of exiting) wraps
// m.Run; Configure registers options from elsewhere (an init function).
//
// One cluster per test binary. The first New (or Cluster) call starts a
// throwaway cluster from the system's PostgreSQL binaries (internal/pgdev) in
// a directory named oml-testdb-* (under /dev/shm when it is roomy, else the
// temp dir), listening only on a unix socket in that directory, with fsync
// off (it is thrown away) and max_connections 300. Main stops it and deletes the directory after m.Run.
//
// Fresh databases by cloning. A template hook (for example the schema
// migration) runs once per binary, lazily, into a template database; each
// New then runs CREATE DATABASE ... TEMPLATE, which copies files instead of
// replaying migrations. Several named templates may be registered
// (WithNamedTemplate, selected per test with Template(name)); with none, New
// clones PostgreSQL's empty template1. Templates are marked
// ALLOW_CONNECTIONS false once built, because a single open connection to a
// template makes every clone fail.
//
// Cleanup, in three layers, because `go test` kills a binary on panic and on
// -timeout without running deferred code or TestMain's tail:
//
//  1. Main stops the cluster and removes its directory after m.Run.
//  2. A watchdog process (sh, in its own session so Ctrl-C spares it) is
//     started with the cluster. It blocks reading a pipe whose only writer
//     is the test binary; when the binary exits for any reason (panic,
//     timeout, SIGKILL), the read returns EOF and the watchdog stops the
//     postmaster (SIGQUIT, immediate shutdown) and removes the directory.
//  3. Each binary, before starting its cluster, removes oml-testdb-*
//     directories whose owning process (pid and start time, in the
//     directory's "owner" file) is gone, stopping their postmasters first.
//
// Replication nodes (replica.go). Failover tests get private clusters of
// their own, never the shared one: NewPrimary (wal_level = replica, a
// replication line in pg_hba.conf), StartStandby (pg_basebackup -R -X
// stream), LoseTail (replayed, standby stopped, more writes, primary
// crashed, standby started and promoted), TakeBaseBackup + Restore (a
// point-in-time-restore-like node: same system identifier, new timeline,
// behind), Node.Identity (system identifier and timeline). They live under
// an oml-testdb-repl-* directory that the same three cleanup layers cover.
//
// Environment:
//
//   - OML_TEST_DATABASE_URL: use this server instead of starting one. The
//     role needs CREATEDB. Databases are named oml_test_<pid>_<random>_*,
//     dropped at the end of each test and of the binary. Roles are
//     cluster-wide, so template hooks that create roles must tolerate
//     running concurrently with other binaries against the same server.
//   - OML_TESTDB_DIR: where the per-binary cluster directories go
//     (default /dev/shm if roomy, else TMPDIR).
//   - OML_PG_BINDIR: which PostgreSQL installation to use (see pgdev).
package testdb

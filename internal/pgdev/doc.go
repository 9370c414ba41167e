// Package pgdev runs a private PostgreSQL cluster from the system's server
// binaries: it finds (or installs) initdb/pg_ctl/postgres, initialises a data
// directory, starts and stops the postmaster, and says whether one is running.
// Both `oml dev up` (a cluster under .oml/ in the working directory) and the
// test harness (internal/testdb, one throwaway cluster per test binary) are
// built on it.
//
// Invariants and decisions:
//
//   - The cluster listens on a unix socket in a directory of its own (never
//     /var/run/postgresql, never another cluster's), so two clusters can use
//     the same port number without colliding. TCP on 127.0.0.1 is opt-in.
//     Socket paths are limited to ~107 bytes; SocketDirFor picks a short
//     directory when the natural one is too long.
//   - Authentication is `trust` for local connections: the socket directory
//     is 0700 and owned by the server user, so only that user and root can
//     reach it. TCP, when enabled, trusts every local user (dev use only).
//   - initdb and postgres refuse to run as root. When the calling process is
//     root, every server program runs as an unprivileged service user (the
//     `postgres` system user if it exists, else a dedicated `oml-postgres`
//     system user created with useradd), the data and socket directories are
//     chowned to it, and the data directory's parents are checked for
//     traversal up front so the failure is one clear sentence instead of an
//     initdb permission error.
//   - Runtime settings live in oml.conf inside the data directory, rewritten
//     before every start and included from postgresql.conf, so a restart with
//     another port or socket directory needs no re-initialisation and no
//     shell quoting of pg_ctl -o options.
//   - A postmaster.pid left by a killed server is harmless: PostgreSQL itself
//     ignores a pid file whose process is gone, and Start removes one whose
//     pid now belongs to some other process (pid reuse after a reboot or in a
//     container), which PostgreSQL would otherwise refuse.
//   - Durability (fsync) stays on unless Config.Unsafe is set; only the test
//     harness sets it.
package pgdev

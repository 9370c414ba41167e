// Package schema owns oml's PostgreSQL schema: the embedded, versioned,
// forward-only migrations in migrations/NNN_name.sql and the migrator that
// applies them.
//
// Invariants:
//   - A migration, once released, never changes: its SHA-256 is recorded in
//     oml.schema_migrations and Migrate refuses to run when an applied
//     migration's checksum differs from the embedded file.
//   - The database is never ahead of the binary: if oml.schema_migrations
//     lists a version this binary does not embed, Migrate refuses (an older
//     oml must not write into a newer schema).
//   - Migrate is safe to run twice and concurrently: it holds a session
//     advisory lock (AdvisoryLockClass, AdvisoryLockMigrate) for its whole
//     run, and applies each pending migration plus its bookkeeping row in one
//     transaction, so a crash leaves either all or none of a migration.
//
// The tables, roles, row-level security and the outbox xid rule are
// described column by column in docs/schema.md. Migration 004 adds the job
// roles (oml_lakewriter, oml_auditor) and the database's own checks of the
// chain's shape; trust_copies_and_event_rights keeps each journal-implied
// outbox row in the outbox once (outbox_implied_once; a re-enqueue's copy
// names its dead letter in copy_of) and limits each job role to its own
// event types in oml.append_journal. docs/security.md is the threat model,
// and security_test.go and security_rights_test.go prove each of its rows
// logged in as the role named. grants_test.go holds every object's grants
// to one explicit matrix, so a migration cannot grant or forget silently.
// Every check that guards the chain is a trigger or a privilege in SQL, so
// it holds whoever inserts, not only oml's Go code.
//
// # Where the runtime SQL lives
//
// Each table's queries have one owner package, as named Go functions, and
// none are written under internal/cli: oml.tenants is read through
// internal/tenant (Refs, IDs, Names, IDByName: one listing, ordered by
// name), chain heads through internal/chainverify (StoredHeads), the
// frontier cache through outbox.ReadFrontier (the lake writer alone writes
// it), the outbox's fence, cut and probes through internal/outbox.
//
// sqlc (sql_package: pgx/v5) was evaluated and not adopted: `go run
// github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1` must first compile
// pg_query_go, PostgreSQL's parser through cgo, and on this project's
// 2-core build machine that did not finish in 20 minutes (after 8 minutes
// of module downloads), so `make generate` and a CI `sqlc diff` would
// cost more than the queries they check; and several of oml's queries
// are built at run time (Cut's optional LIMIT, a batch scan narrowed to
// one table), which sqlc would split into near-copies. Hand-written pgx
// queries in one place per table are the house rule instead.
package schema

// Package chain owns oml's per-tenant signed hash chain: the canonical
// digest-only envelope every journal event is signed over (Envelope,
// Encode/DecodeEnvelope, EnvelopeHash, VerifySignature, Record.Check — the
// pieces a verifier needs), and the one append path that writes the journal
// (AppendTx, Append, InTx, Lock).
//
// The envelope is specified byte by byte in docs/journal-envelope.md, with
// the test vector in testdata/envelope_v1.json.
//
// # Invariants of a chain (tenant T)
//
//   - seq runs 1, 2, 3, ... without gaps; PRIMARY KEY (tenant_id, seq) is
//     the last defence against a fork.
//   - prev_hash of seq n is the hash of seq n-1; all zero for seq 1.
//   - hash = SHA-256(envelope); signature = Ed25519(deployment key, envelope).
//   - payload is stored exactly as signed, canonical and digest-only.
//   - recorded_at never decreases along a chain.
//   - oml.chain_heads holds the last (seq, hash); the journal row, the head,
//     the fold state and the outbox rows commit together or not at all.
//   - The database enforces the shape whoever inserts (migration 004,
//     docs/security.md): oml.append_journal (the job roles' only way into
//     the journal) and, for any other insert, the journal_extends_chain
//     trigger refuse a row that does not extend its chain (seq, prev_hash,
//     recorded_at, against the journal itself) and move oml.chain_heads,
//     which no job role may write.
//   - Within a tenant, commit order = seq order = outbox order: the tenant's
//     advisory lock is taken before the head is read and held to commit.
//
// # The append path
//
// AppendTx runs inside the caller's READ COMMITTED transaction and costs two
// pipelined round trips whatever the number of events: (1) the tenant
// setting, pg_advisory_xact_lock(LockClass, TenantLockKey(T)) as its own
// statement, then the head (the journal's last row: never oml.chain_heads,
// which a role could move) and the fold state, each read by a later
// statement whose snapshot postdates the lock grant; (2) the journal rows
// through oml.append_journal (which checks them and moves the head), with
// the outbox rows the fold puts first (append_journal checks they name the
// appended events, so the outbox trigger need not probe the journal for
// them: Plan.TakeOwnOutbox), and the fold's other writes
// (internal/journal). Sealing and
// folding happen in between, in memory; an illegal event is rejected before
// anything is written. Append (and InTx) add BEGIN and COMMIT and retry the
// whole transaction on serialization failures and deadlocks, never after an
// unknown commit outcome.
//
// Rejected alternatives, measured (docs/schema.md, notes §4a):
//   - Lock and head read in one statement (FROM chain_heads,
//     pg_advisory_xact_lock(...)): the statement's snapshot predates the lock
//     wait, so a waiter reads the head as it was before the holder
//     committed. Thousands of primary-key violations per second under load.
//   - REPEATABLE READ / SERIALIZABLE: the transaction snapshot is taken at
//     the first statement, before the lock wait: same stale head. AppendTx
//     refuses any isolation but READ COMMITTED (ErrIsolation).
//   - Folding BEGIN into the first pipeline and COMMIT into the second would
//     save two round trips (~0.1 ms each here) against a commit flush of
//     several ms; it would also commit before the client-side checks of the
//     second pipeline ran. Not worth it.
//   - Signing a large batch on several goroutines (the links need only the
//     hashes, so signatures are independent): on the 2-vCPU build VM, one
//     writer with batches of 100 was no faster (2.2-3.4k events/s either
//     way), because the other cores were busy. Sealing stays sequential.
//
// The lock is held through the commit flush, so one tenant tops out near
// 1/(flush time) appends per second; a batch of k events (one AppendTx with
// k events) takes the lock and flushes once. Across tenants appends scale.
//
// # Failure handling
//
//   - ErrChainConflict: the primary key refused a seq, or the database
//     (journal_extends_chain) refused the rows as not extending the
//     chain — the lock discipline was broken somewhere (it cannot happen
//     through this package). Nothing was written; the chain did not fork.
//   - journal.ErrRejected / journal.ErrUnknownTenant: the events are not
//     allowed in the current state; nothing was written.
//   - Any error leaves the caller's transaction aborted: roll it back.
package chain

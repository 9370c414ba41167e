// Package journal owns what journal events mean: the event catalog (one
// digest-only payload struct per event type, with stable JSON field names
// and strict decoding), the claim fold (the state machine every event is
// validated against and the state rows it writes), and the outbox rows each
// event implies for the lake writer.
//
// It does not write the journal itself: internal/chain's append path seals
// the events (seq, hash, signature) under the tenant lock, then asks this
// package to load the state the events touch (QueueLoad, pipelined after
// the lock), fold them in memory (Fold: pure, so an illegal transition is
// rejected before anything is written), and queue the writes (Plan.Queue;
// the outbox rows that come first, the events' own, the append path first
// takes with Plan.TakeOwnOutbox and hands to oml.append_journal, which
// inserts them with the events). Package chain imports journal, never the
// reverse.
//
// Invariants:
//   - Payloads carry ids, digests and attribution only. Bodies (ciphertext)
//     and data keys travel beside an Event and land in oml.claim_bodies and
//     oml.claim_keys, never in the journal or the outbox.
//   - Every event yields exactly one bronze.events append row, first; then
//     promotion yields one silver.claims materialize row, and a retirement
//     (demote, erase, simulation end, reassign) of a claim that was ever
//     promoted yields one silver.claims retract row; each of those changes
//     to a promoted claim also yields one gold.lineage row and, beside it
//     with the same payload, one gold.workareas row. Nothing else writes the
//     outbox except a dead-letter re-enqueue (a copy of the original row)
//     and a restore of a lost tail (Restore: the same rows, put back at the
//     seqs the lake applied them at).
//   - Outbox rows are queued in event order, under the tenant lock, so a
//     tenant's outbox order equals its journal order.
//   - A held body reaches the lake only through a materialize row, and a
//     materialize row exists only for a promoted claim.
//
// The catalog is documented in docs/events.md, the tables in docs/schema.md.
package journal

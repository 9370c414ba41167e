// Package outbox reads oml.outbox for the lake writer: the stable-prefix
// fence, the batch cut inside it, streaming a seq range, and naming the
// backend that holds the snapshot horizon back.
//
// # The stable prefix
//
// Outbox seqs are drawn at insert but become visible only at commit, and
// transactions of different tenants are deliberately unserialized, so a
// smaller seq can become visible after a larger one. A cursor that passes a
// seq still in flight loses that row for ever. The lake writer therefore reads
// only a prefix every row of which has committed or can never commit.
//
// The rule is a fence (TakeFence): in a fresh transaction, read S, the
// outbox sequence's last value, and then X, a new transaction id. The schema
// (internal/schema, outbox_take_xid) guarantees that every outbox insert owns
// its transaction id before it draws its seq; xids are assigned in increasing
// order; so every transaction that drew a seq ≤ S got its xid before X was
// assigned, i.e. has an xid < X. Once the snapshot horizon
// pg_snapshot_xmin(pg_current_snapshot()) has passed X, every one of them
// has ended, and the rows with seq ≤ S are final: exactly the committed ones,
// for ever (a rolled-back seq is a permanent gap and stalls nothing).
//
// Rejected alternatives, both shown to lose rows in
// shared/notes/chain-and-outbox-notes.md §4c:
//   - "rows whose xid is below the snapshot xmin": xid order is not seq order
//     (a transaction that took its xid early can commit seq 8 while seq 7 is
//     in flight), so it is no seq prefix;
//   - any fence built on pg_snapshot_xmax, which is one past the latest
//     completed xid: an in-flight xid can sit at or above it.
//
// A long-running transaction anywhere in the cluster (any database) keeps
// the horizon behind X. That is lag, never loss; Blockers names it.
package outbox

// Package outbox reads oml.outbox for the lake writer: the stable-prefix
// fence, the batch cut inside it, the batch read itself (batch.go: the rows
// of a seq range with their journal events and held bodies, and the same
// for rows prune deleted that the journal implies), the small probes
// beside it (probes.go: a table's missed rows, a recorded batch's row
// count, rows past a seq, lag, the backlog `oml lake status` shows), and
// naming the backend that
// holds the snapshot horizon back; it is the one reader of the frontier
// cache (ReadFrontier; the lake writer alone writes it); and it prunes the
// rows the lake has applied (Prune, behind `oml outbox prune`).
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
//
// # Not ahead of a failover
//
// A prefix that is final on the primary can still be lost by a failover to
// a standby that has not flushed it; a lake (or a witness) built on it would
// then be ahead of the promoted database. So the lake writer cuts batches
// only from the part of the stable prefix that the required standbys have
// flushed (internal/replication: --durable-on auto|none|N).
//
// Which WAL position covers the prefix: the commit records of its rows, and
// nothing less. Those are the commit records of transactions with an xid
// below X (the fence's xid). A transaction inserts its commit record into
// WAL before it leaves the process array (RecordTransactionCommit runs
// before ProcArrayEndTransaction, with or without synchronous_commit), and
// the horizon passing X means every one of them has left it. So the WAL
// insert position read *after* the horizon was seen past X (CoverLSN) is at
// or past every one of those commit records; everything else the batch
// reads (journal events, held bodies) was committed by the same
// transactions or by earlier ones, whose commit records come earlier still. A position
// read with the fence itself (before the horizon passed) is not enough: a
// transaction of the prefix may commit after it. pg_current_wal_lsn() (the
// write position) is not enough either: an asynchronous commit's record may
// not be written yet. The insert position overshoots by whatever other
// sessions wrote meanwhile, which costs only a little wait, never safety.
//
// The wait comes before the cut, not before the table commits: the batch
// bounds recorded in the lake (and replayed after a crash) are then always
// inside what the standbys held when the batch was cut, a retry never has
// to wait again, and the stable horizon that status reports is the durable
// one. The cost is that one fence's LSN stands for its whole prefix; the
// loop keeps a short queue of final fences so the frontier advances in
// steps while a standby catches up.
//
// # Pruning
//
// Prune deletes, per lake table, the prefix (in seq order) of the table's
// rows that are at or below the table's lake-writer txn version and the
// frontier cache and older than the retention, keeping dead-lettered rows
// inside it, stopping at a re-enqueued copy or a young row, and never
// splitting an event's rows. The bounds come from the caller
// (internal/outboxprune reads them from the lake). Why a prefix: a reader
// that needs pruned rows back (the lake writer rebuilding a missing table)
// re-derives them from the journal (journal.DeriveOutbox), which knows
// their order but not their seqs; when every pruned row of a table comes
// before every row still there, "the implied rows not in the outbox, then
// the outbox rows" is the table's exact history. oml.outbox_pruned records
// each table's prefix end for those readers.
//
// Each batch is one short transaction (DefaultPruneBatch rows): the row
// locks it takes are on rows nobody else writes, appends never wait, and
// the lake writer's fence waits at most for one batch (it waits for
// transactions that hold an xid, and a delete takes one).
package outbox

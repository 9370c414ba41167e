// Package recovery brings a chain back after a failover or a
// point-in-time restore handed oml a database that is behind the lake.
// It owns two operations (docs/runbooks/failover.md):
//
//   - RestoreTail (`oml chain restore-tail`): the chain lost its tail and
//     nothing was appended since. The lost events are re-inserted from the
//     tenant's bronze.events table (each row is the full signed envelope),
//     each verified first against the chain (seq, link, hash, signature
//     under a key the provider chain issued, canonical payload); the fold
//     they imply is rebuilt with the journal's own fold (journal.Restore);
//     the outbox rows the lake already applied are put back at their seqs,
//     the outbox sequence is moved past every table's txn version, and the
//     restore is journalled as chain.tail_restored. Afterwards the journal
//     holds the lost primary's events, event for event.
//   - AcceptFork (`oml chain accept-fork`): the database already wrote
//     over the lost tail. The journal wins; chain.fork_accepted on the
//     provider chain names the lost witnessed/bronze heads and the new
//     head, so the loss stays listed for ever and the fork check reports
//     it as accepted instead of failing. The lake's tables are rewound
//     by `oml lake repair` (not here).
//
// Invariants:
//   - Nothing is inserted that was not verified; a bronze row that fails a
//     check stops its tenant's restore and is named.
//   - One tenant's restore is one transaction under the tenant's chain
//     lock: a crash leaves the tenant as it was, and a re-run plans again
//     from what is stored (a restored tenant has nothing left to restore).
//   - The journal rows are written by writeChain, one small function, in
//     seq order, the way the append path writes them; the database checks
//     each extends the chain and moves oml.chain_heads (migration 004).
//
// A tail holding a deadletter.reenqueued is refused at plan time, naming
// the event (reenqueuedIn): the re-enqueued copy's outbox seq is not
// recorded as a copy anywhere in the lake, so the copy, the original row
// and the dead letter's new_outbox_seq cannot be put back as they were;
// the way forward is accept-fork and repair. A claim still held at the end
// of the tail comes back body_lost (journal.StateBodyLost), named in the
// chain.tail_restored.
//
// Rows the lake no longer records exactly: a silver.claims row keeps only
// the outbox seq of a claim's last change, so an earlier change's outbox
// row is put back at a free seq between its neighbours (never above the
// seq it really had, so it stays applied). Tenants whose tails were lost
// together share those gaps, so the seats of every tail restored in one
// round are chosen together (seats.go), before any is written. Outbox rows the lake
// had not applied yet are re-inserted at new seqs, after every table's txn
// version, and drained as usual.
package recovery

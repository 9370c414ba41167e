// Package deadletter inspects and repairs the rows the lake writer gave up
// on (oml.dead_letter), behind `oml deadletter list|show|reenqueue`.
//
// # What it owns
//
// Reading: List and Show read oml.dead_letter joined with the journal (the
// materialize.skipped event that moved the row there and, once repaired, the
// deadletter.reenqueued event), the original outbox row, and the tenant name.
//
// Repair: Reenqueue appends one deadletter.reenqueued event per dead letter
// through the real append path (chain.AppendTx). The journal fold does the
// rest in the same transaction: it inserts a new outbox row carrying the
// original operation and marks the dead letter re-enqueued with the event's
// seq and the new outbox seq. This package never inserts outbox rows or
// marks dead letters itself.
//
// # Invariants
//
//  1. A dead letter is re-enqueued at most once. The fold rejects a second
//     deadletter.reenqueued for the same dead letter; Reenqueue turns that
//     (and the cheaper check before it) into an AlreadyReenqueued result that
//     names when, by whom and into which outbox seq, never an error.
//  2. Every repair is journalled: who (By), why (Reason), which dead letter
//     and which original outbox seq are in the signed event.
//  3. The re-enqueued operation is the one the journal implies. An outbox
//     payload is a pure function of the journal (the bronze row's event
//     type; a retract's state, by and reason from its event; a
//     materialization's attribution and digests from the claim's
//     claim.submitted and claim.promoted events). When the dead-lettered
//     payload disagrees with that derivation (the bad-payload poison kind:
//     the outbox payload itself was damaged), Reenqueue rewrites the dead
//     letter's payload to the derived one inside the same transaction as the
//     event, and says so in the journalled reason ("payload re-derived from
//     the journal"), so the fold's copy carries the repaired operation. This
//     is the only write this package makes besides the append, it touches
//     only a not-yet-re-enqueued dead letter under the tenant's chain lock,
//     and it is visible in the chain. A payload that cannot be derived (an
//     unknown target) is left as it is.
//
// # Failure handling
//
// Each dead letter is re-enqueued in its own transaction, so one that
// fails (say, a rejected event) does not undo the others; the results say
// which ones were re-enqueued, which already were, and which failed.
// Re-enqueueing does not repair the cause: a row whose body is still
// missing dead-letters again after its retry budget (a new dead letter for
// the new outbox seq), which is the honest outcome.
package deadletter

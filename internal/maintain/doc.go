// Package maintain keeps oml's Delta tables healthy and makes erasure
// physical: it measures every tenant table (commits since checkpoint, small
// files, tombstoned bytes, files that may still hold an erased claim's
// ciphertext), decides from those measurements what is due (Decide), and
// does only that (Run): checkpoint, erase bodies, compact, vacuum, clean the
// log. It also reports how far each erased claim has got on its way out of
// the lake (ErasureStatus).
//
// It owns no Delta mechanics: commits, conflicts, compaction, vacuum and
// log cleanup are internal/lake/delta's. What it adds is policy and the
// two rewrites oml needs beyond plain Delta:
//
//   - Compact wraps delta.Optimize so that losing a commit race to the lake
//     writer is never a problem: a winner that only appended is rebased over
//     (delta.Optimize re-validates that every file it replaces is still
//     live); a winner that removed one of those files (a MERGE) makes the
//     compaction start again from the new snapshot, a bounded number of
//     times, and otherwise give up. Nothing is ever published over a file
//     another commit removed, so no row is lost or duplicated.
//   - EraseBodies rewrites every live silver file that holds a row whose
//     state is erased and whose body is not null, with that body nulled.
//     This changes data (a column's value), so it is a dataChange=true
//     commit with operation UPDATE, not a compaction; the removed files
//     become tombstones and vacuum deletes them after the retention. It
//     rewrites a file whatever its size: erasure does not wait for a file
//     to be small. Files are ruled out by stats, then by their state column
//     alone when their body null count covers their erased rows (in oml only
//     an erased row ever has a null body). The same race rules as Compact
//     apply.
//
// ErasureStatus answers, per erased claim, which stage it has reached
// (key destroyed, merged into silver, in live files, only in removed
// files, gone) and when its bytes can be gone; it reads tombstoned and
// orphaned files straight from Parquet, since Delta's Scan reads only live
// ones. See docs/maintenance.md and docs/erasure.md.
//
// # Invariants
//
//   - A maintenance commit never carries a txn action: the lake writer's
//     txn version (its exactly-once record) is untouched by maintenance.
//   - A maintenance commit removes only files that are live in the snapshot
//     it commits on top of (re-validated after every lost race).
//   - Vacuum never runs with a retention below the table's
//     delta.deletedFileRetentionDuration unless the caller forces it
//     explicitly; delta.Vacuum enforces it.
//   - Maintenance is safe beside a running `oml lake drain`: both only ever
//     commit with put-if-absent and both redo their work on a lost race.
package maintain

// Package delta is oml's own implementation of the Delta Lake protocol:
// small, strict, and correct enough that Spark, delta-rs, Trino and DuckDB
// read what it writes and that it reads what they write. It works on any
// store.Store whose root is the table root.
//
// # What it owns
//
//   - the log actions (protocol, metaData, add, remove, txn, commitInfo kept
//     as opaque JSON; cdc and domainMetadata recognized and ignored; sidecar
//     and checkpointMetadata recognized and refused) and their JSON encoding;
//   - the Spark JSON schema (schemaString);
//   - snapshot reading (Load): _last_checkpoint as a hint confirmed by
//     listing, classic single-file and multi-part checkpoints, then
//     contiguous JSON commits, reconciled per the protocol;
//   - the strict gate (checkRead/checkWrite);
//   - the writer (Writer): create, append, copy-on-write rewrite, txn,
//     commit by put-if-absent with typed conflicts and ambiguous-write
//     resolution;
//   - checkpoints, compaction (Optimize), log cleanup and vacuum.
//
// # Invariants
//
//   - A snapshot is never partial: a gap in the versions, a corrupt entry or
//     an unsupported feature fails Load; nothing is returned.
//   - File actions are keyed by their path decoded exactly once
//     (DecodePath); partition values come only from add.partitionValues,
//     never from directory names.
//   - The latest protocol and metaData win; the gate runs on them after the
//     whole replay, and again on every snapshot a writer refreshes, so a
//     table another engine upgraded makes oml fail closed.
//   - A commit file is only ever created with PutIfAbsent; nothing in this
//     package overwrites a commit. An ambiguous PutIfAbsent is resolved by
//     reading the same version back and comparing bytes (every commit
//     carries a unique commitInfo.txnId), never by moving on to the next
//     version.
//   - A checkpoint holds every txn (with lastUpdated) and _last_checkpoint
//     is written only after the checkpoint file is complete.
//   - Tables that set delta.setTransactionRetentionDuration are refused:
//     other engines would expire txn identifiers and exactly-once on top of
//     txn would silently break.
//
// # Commit outcomes
//
//	PutIfAbsent(<v>.json)
//	  ├─ ok                         → landed as v; apply own actions in memory
//	  ├─ ErrExists ─ read back ─┬─ our bytes     → landed (a backend retry of ours)
//	  │                         └─ other bytes   → catch up, *ConflictError{winners}
//	  ├─ ErrAmbiguous ─ read back ┬─ our bytes   → landed
//	  │                           ├─ other bytes → catch up, *ConflictError
//	  │                           └─ absent      → put the same bytes at v again
//	  │     (bounded; then *AmbiguousCommitError and the writer must be reopened)
//	  └─ other error                → nothing landed; re-list before the next commit
//
// After catching up, the writer gate runs again: a protocol or metadata
// change by another engine that oml cannot honor makes every later commit
// fail with the gate's error.
//
// See docs/delta.md for the operator view and the exact error strings.
package delta

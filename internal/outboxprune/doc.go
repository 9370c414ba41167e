// Package outboxprune is `oml outbox prune` and the outbox parts of `oml
// doctor` and `oml lake maintain --prune-outbox`: it reads what the lake
// has applied (every table's lake-writer txn version, from the Delta logs),
// refuses when the lake cannot be read or does not share the database's
// history (the lake writer's continuity check), and hands the bounds to
// outbox.Prune, which deletes in short batches.
//
// It sits above internal/lakewriter (which reads the lake) and
// internal/outbox (which owns the outbox SQL) so that neither imports the
// other for this.
//
// # Why the lake, and why refuse
//
// A table's txn version v means "every outbox row for this table with seq
// ≤ v is in it" (lakewriter invariant 3). That is what makes a row safe to
// delete, and only the table's Delta log says it: the frontier cache alone
// would be a guess (a table held for a fault of its own, or restored from
// an older copy, is behind it). So prune needs --lake, and an unreadable
// table log is an error, never "no rows applied" (which would be safe) or
// "the frontier" (which would not). When the continuity check says the lake
// is ahead of or diverged from the database (a failover that lost a tail,
// a restore), txn versions describe another history's rows: prune refuses.
//
// # Which role
//
// The owner (the role that runs migrations). The lake writer role may only
// INSERT outbox rows: giving it DELETE would let a compromised or buggy
// writer remove rows it never drained, the one loss the outbox exists to
// prevent. The owner can do that anyway. No grant is needed; the migration outbox_pruned
// (oml.outbox_pruned) grants only SELECT on its mark to the writer and the
// auditor.
package outboxprune

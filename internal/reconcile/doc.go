// Package reconcile audits the lake against the journal fold, behind
// `oml reconcile`. It compares each tenant's Delta tables (bronze.events,
// silver.claims, gold.lineage, gold.workareas) with what PostgreSQL's journal and claim fold say they
// must hold, and reports named finding classes (docs/reconcile.md). It
// never compares store with store: the comparand is always the fold (the
// journalled digests, ADR-0003 d7), never another copy.
//
// # What is compared, at which point
//
// The lake is behind the journal by design, so a table is compared at a
// cutoff: the outbox seq C = max(frontier cache, the table's lake-writer txn
// version). The txn version V of a table means "every outbox row for this
// table with seq ≤ V is in it" (lakewriter invariant 3); the frontier F
// means every table touched by a batch ending at or below F committed it.
// C maps to two per-tenant journal seqs. A tenant's outbox rows are
// inserted in journal order under its chain lock, so for one target, seq
// order is journal order (the copies of re-enqueued dead letters aside). J
// is the last event all of whose rows for the table are at or below C; S ≥
// J is the last event with any row for the table at or below C. One event
// may have several rows for a table (a simulation ending several claims),
// and a batch may end between them, so an event in (J, S] may be partly
// applied: it is neither required nor refused. Then:
//
//   - bronze.events must hold exactly one row per journal event with seq ≤ J,
//     with the journal's hash, event type and payload (compared by SHA-256),
//     and no row for an event beyond S;
//   - silver.claims must hold exactly one row per claim promoted at journal
//     seq ≤ J, with the journalled plaintext and ciphertext digests, a body
//     that hashes to the ciphertext digest, the fold's attribution, and —
//     when the claim's last change is at or below J — the fold's state; a row
//     of a claim promoted beyond S, or never promoted, is unexpected.
//
// The first version of this package used a single J (the largest journal
// seq at or below C); TestReconcile_WhileTheWorkloadAndTheLakeWriterRun
// caught it reporting a promoted claim missing when a batch had ended
// between a promotion's bronze row and its materialize row.
//
// Rows above the cutoff are simply not drained yet and are not expected.
//
// After `oml outbox prune` the rows at or below C may be gone; the mapping
// stays the same because prune never deletes a row above C (it deletes only
// rows at or below both the table's txn version and the frontier), and an
// event whose rows for a table straddle prune's bound keeps them all, so
// the last row at or below C is either still there or belongs to an event
// at or below J (then S = J). TestPrune_* in internal/outboxprune reconcile
// after pruning, including while the lake writer runs.
//
// The read order makes the cutoff safe against a concurrent drain: the
// frontier is read first, then the tables' Delta snapshots, then a
// REPEATABLE READ, READ ONLY PostgreSQL snapshot. Every lake row was drained
// from an outbox row committed before the lake commit, hence visible to the
// later PostgreSQL snapshot; every row at or below the earlier frontier is
// in the later lake snapshot. The read-only transaction takes no xid, so it
// never holds back the lake writer's stable prefix (the fence waits on
// running xids only); it does hold back vacuum for the tenant's duration.
//
// # Dead letters
//
// A dead-lettered row is knowingly absent (ADR-0003 d6): each open dead
// letter is a dead-lettered finding, and the rows it explains (a missing
// silver row or an outdated state for the claim, a missing bronze row) are
// not reported again as missing-in-lake or state-mismatch. A re-enqueued dead
// letter whose copy is above the cutoff is pending, not a finding.
//
// # Memory: flat in the number of claims
//
// Both sides are streamed in key order and merged:
//
//   - PostgreSQL: one ordered query per table and tenant (journal by seq via
//     its primary key; claims by artifact_id COLLATE "C", version — sorted by
//     the server, which spills to disk under work_mem), read row by row.
//   - Lake: the live files are scanned one at a time reading only the needed
//     columns (bodies are hashed as they stream by and dropped), and compact
//     records (key, digests, attribution; about 300 bytes a claim, 130 an
//     event) go through an external sort: one reused arena of at most
//     RunBytes (32 MiB) is filled, sorted and spilled to a temporary file,
//     and the runs are merged with a 64 KiB read buffer each.
//
// The live memory is therefore about RunBytes + runs × 64 KiB + the
// projected column chunks of one Parquet row group (the reader loads a row
// group's column chunks whole; the lake writer's row groups are one batch)
// + the Delta snapshot's file list + the open dead letters of one tenant +
// the findings kept (MaxFindings per class; counts are always complete).
// The bronze buffer is spilled and freed before silver is read, so only one
// buffer is live at a time once a tenant is large enough to spill. Measured
// (BenchmarkReconcile, docs/reconcile.md): 114 MiB peak heap and 148 MiB
// peak RSS for one tenant of 1,000,000 claims (15.6 s), the same as for
// 250,000 (111 MiB, 144 MiB). None of these grows with the number of claims
// except the run count (one run per RunBytes of records: ~100 runs, 6.4 MiB
// of buffers, for 10 million claims of one tenant) and the file list (per
// file, not per row). Temporary disk use is about the size of the records,
// in TMPDIR (or Options.TempDir).
//
// gold.lineage (gold.go) is compared with the rows the journal implies,
// re-derived by replaying the tenant's chain (journal.DeriveOutbox): every
// implied change at or below J exactly once, equal in every column but
// outbox_seq, nothing beyond S, nothing not implied. That replay holds the
// tenant's fold state, so the gold comparison's memory is not flat in the
// number of claims (the lake side still goes through the external sort).
//
// gold.workareas (workareas.go) is compared with the same replay's
// gold.workareas rows, added up per workarea (tables.GoldWorkareaRow.Apply,
// the lake writer's MERGE): a row equals the sum of its workarea's changes
// at or below J plus a prefix of those in (J, S]. One row per workarea on
// each side is held in memory.
package reconcile

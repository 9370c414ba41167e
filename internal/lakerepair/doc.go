// Package lakerepair is `oml lake repair`: the journal wins, mechanically.
// It computes a plan from what the lake writer's continuity check
// (lakewriter.CheckLake) and the reconcile audit (reconcile.Run, every
// finding through Options.OnFinding) say about the lake, makes every
// affected Delta table equal to what the database's history says it must
// hold, archives every row it removes, and journals what it did.
//
// # What it owns
//
//   - The rewind of a table whose history diverged from the database's (a
//     failover that lost a tail the lake drained, after `oml chain
//     accept-fork`; a point-in-time restore is the same case). The table
//     is set back, by one restore-style Delta commit, to the newest version
//     whose lake-writer txn version is at or below the last seq both
//     histories share (Continuity.LastAgreedSeq): the files added since are
//     removed, the ones removed since re-added, dataChange true, and the
//     txn version set back to that version's (Commit.RewindTxn), with that
//     version's batch record (commitInfo.omlBatch) so the continuity check
//     passes legitimately on the next drain: the anchor it recorded is in
//     the database. The drain then re-applies the new timeline's rows
//     exactly once (a table at txn version v holds every row ≤ v; rows above
//     it are applied, gap rows first). When a needed version or data file
//     is gone (log cleanup, vacuum), the table is rebuilt instead: every
//     live file removed, txn version 0, and the drain's catch-up
//     re-materializes it from the database.
//   - The row repairs (rows.go), when the lake shares the database's
//     history: every affected key (a bronze event's journal seq, a silver
//     claim's artifact id and version) named by a missing-in-lake,
//     unexpected-in-lake, duplicate-in-lake, digest-mismatch or
//     state-mismatch finding has every copy removed copy-on-write (the
//     files holding one rewritten without it) and the rows the database
//     says it must hold put back, built by the drain's own code
//     (lakewriter.TableRowsThrough: the same query, decoding and row
//     check; the one home for "the rows of table T up to seq S, pruned or
//     not", which re-derives the rows `oml outbox prune` deleted from the
//     journal, journal.DeriveOutbox, in the same snapshot), up to
//     the table's txn version and never above it — a row above it is the
//     drain's to apply, and putting it back here would make the drain
//     apply it twice (TestRepair_RewindNeedsVacuumedFiles_RebuildsFromTheDatabase
//     caught the first version doing so); such rows are listed as
//     pending. A data file the store lost (or that is not Parquet) is
//     dropped from the log and its rows put back by the next pass of the
//     same run; a table that is gone is created and filled at its cutoff.
//     The txn version is preserved (only a rebuilt table gets one, and a
//     table below its outbox prune mark — restored from an old copy,
//     rewound below it — is caught up to its cutoff: every key reconcile
//     finds wrong there is put back and the commit sets the txn version to
//     the cutoff; the drain holds such a table, since it cannot read the
//     pruned rows in between). Memory grows with the number of findings
//     (one key each) and the rows put back, not with the table: files are
//     scanned one at a time on their key columns, a rewritten file is held
//     alone, rows put back are written 10,000 to a data file; a table
//     whose rows were pruned also replays its tenant's chain once per
//     table repaired.
//   - The tables of a tenant the database does not know (lost.go: created
//     only in a timeline a failover lost): found by listing the lake
//     root, every row archived, every file removed; journalled on the
//     provider chain with the tenant's id.
//   - Erasure (erasure.go): a repair never writes an erased row's body —
//     not in a file a rewind re-adds (one `oml lake maintain` had
//     rewritten to null it since), not in the rows it puts back or keeps,
//     not in the archive.
//   - The archive: before a table is changed, every row the change removes
//     (for a rewind: every row of a removed file above the restored txn
//     version; for a rebuild: every row) is written as Parquet under
//     <lake>/_oml_repair/<tenant>/<layer>/<name>/v<version>/, with a
//     manifest.json naming the table, the Delta version read, the restore
//     target, the findings and the journal event that will name the
//     commit. The directory is named by the table and the Delta version the
//     repair read, so a re-run after a crash before the commit rewrites
//     the same objects: nothing is archived twice.
//   - The journal record: one lake.repaired event per tenant repaired,
//     appended through chain.Append with the deployment key, naming every
//     repair commit (table, Delta version, plan digest, classes, counts,
//     archive). Which commits are journalled is read back from the
//     journal, not remembered: a run journals every repair commit of the
//     tables in scope that no lake.repaired names yet, so a crash before
//     the journal step is finished by the next run, and a commit is never
//     named twice.
//
// # Invariants
//
//  1. The lake writer lease is held (lakewriter.HoldLease) for the whole
//     of a run that changes anything, so a repair never interleaves with a
//     drain's batch; a dry run takes no lease and changes nothing.
//  2. Every repair is an ordinary Delta commit (operation "OML REPAIR",
//     dataChange true, commitInfo.omlRepair with the plan digest, action,
//     classes and counts) that any Delta reader can follow.
//  3. A table is rewound only when its tenant's chain agrees with what the
//     lake saw or the disagreement was accepted (chain.fork_accepted): a
//     lost tail that restore-tail can bring back is never thrown away, and
//     a lake that is only ahead (the database wrote nothing since) is left
//     for `oml chain restore-tail`.
//  4. The frontier cache is lowered to the shared seq before the first
//     table is changed, so a crash between tables never leaves the cache
//     claiming rows the tables no longer hold.
//  5. Idempotent: every step is a function of the lake and the database as
//     they are; a second run after success finds nothing to do. The plan is
//     recomputed after each pass (at most three): the confirmation that the
//     repair worked, and the next pass for what a pass uncovered.
//
// Rejected: repairing from reconcile's report (it keeps MaxFindings per
// class, so a large problem would need many runs); rewinding by deleting
// commit files (history is evidence, and other readers may be pinned to
// those versions); re-deriving a rewound table from the outbox always (a
// restore-style commit is one small log entry while the files are within
// retention).
//
// Crash points (tests): AfterArchive, AfterTable, BeforeJournal.
package lakerepair

// Package lakewriter is the lake writer behind `oml lake drain`: it drains
// oml.outbox into the per-tenant Delta tables, exactly once, across crashes,
// retries, restarts and a second writer started by mistake.
//
// # Invariants
//
//  1. Stable prefix. A batch (F, E] is cut only when every outbox row with
//     seq ≤ E has either committed or can never commit. The rule used is a
//     fence: in a fresh transaction read S = the outbox sequence's last value,
//     then X = pg_current_xact_id(). The schema guarantees that every outbox
//     insert owns its transaction id before it draws its seq, so every
//     transaction that drew a seq ≤ S has an xid < X. Once
//     pg_snapshot_xmin(pg_current_snapshot()) > X, all of them have ended and
//     the prefix through S is final. Rejected: filtering rows by
//     xid < xmin alone (xid order is not seq order, so a cursor can pass seq 8
//     while seq 7 is in flight) and any fence built on pg_snapshot_xmax
//     (one past the latest *completed* xid, so in-flight xids can sit above it).
//     A long-running transaction anywhere in the cluster holds xmin back: that
//     is lag, reported by `oml lake status`, never loss.
//  2. Size and age limits (--batch-rows, --batch-bytes, --max-wait) choose E
//     inside the stable prefix, and only when a batch is first cut. A retried
//     batch is reconstructed from its recorded bounds and has the same rows.
//  3. Per-table idempotence. Every commit to a table carries the Delta txn
//     action {appId: "oml-lakewriter", version: E} and the bounds (F, E) in
//     commitInfo. A table whose txn version is ≥ E skips the batch, and no row
//     with seq ≤ a table's txn version is ever applied to it again. This holds
//     because E is inside the stable prefix: a table at version v has
//     received every row for it with seq ≤ v.
//     The one commit that sets a txn version back is `oml lake repair`'s
//     rewind (internal/lakerepair, delta.Commit.RewindTxn): after a
//     failover it restores a table's files and txn version to a version at
//     or below the last seq the lake shares with the database, with that
//     version's batch record, so the invariant holds again and the drain
//     re-applies the new timeline. The repair holds the lease (HoldLease)
//     and lowers the frontier cache with it (RewindFrontier).
//  4. The Delta log is the recovery authority. oml.lake_frontier is a cache
//     for status and cheap restarts; it advances only after every table a
//     batch touched has committed. On start the writer reads the newest
//     recorded batch bounds from the tables' logs; if that batch is ahead of
//     the cache, it is the batch that was interrupted, and it is rebuilt from
//     its bounds and applied to the tables still behind it.
//  5. Poison rows. Every row is checked against the signed journal event it
//     cites before it can enter the lake (check.go): its tenant created by
//     the provider chain, the event's hash, a payload equal to what the
//     journal implies, and no earlier live (not dead-lettered) outbox row
//     of the same implied identity (one lake row per implied row, even for a
//     copy planted behind the database's outbox_implied_once). A row that
//     fails that, or for another reason of its
//     own (undecodable payload, missing held body, ciphertext digest
//     mismatch, unknown target), costs the batch one attempt, counted in
//     PostgreSQL so restarts do not reset it. After the budget, one
//     PostgreSQL transaction journals materialize.skipped on the tenant's
//     chain (the provider chain for a tenant that does not exist) and moves
//     the row to oml.dead_letter; the batch then proceeds without it.
//  6. Whose fault (faults.go). One table's fault (a corrupt log, an
//     unreadable data file) holds that table and the others go on; a
//     configuration error ends DrainOnce at once (the loop reports it and
//     backs off); an outage of the database or the object store is never a
//     poison row: the writer backs off and retries the same batch, DrainOnce
//     for at most MaxOutage.
//  7. Continuity (continuity.go). The lake never builds on a database whose
//     history is behind it (a promoted standby that lost a tail, a
//     point-in-time restore). Every commit records, next to its bounds, the
//     database's system identifier and timeline, the number of outbox rows
//     in (F, E] and an anchor: the batch's last outbox row with a digest of
//     its content and of the journal event hash it cites. Before writing
//     anything (recover), and before every batch, the writer checks that
//     the outbox sequence is at or beyond every txn version and that each
//     table's newest recorded batch is in the database with the same
//     content; if not, it names the last seq both agree on and refuses to
//     write to any table (the frontier is global). Why the batch-end row
//     and not a digest of the whole batch: checking it is one primary-key
//     probe whatever the batch size, so the per-batch check is one round
//     trip (measured 0.69 ms against 1.17 s per 10,000-row batch); the
//     event hash stands for the tenant's chain before it, and the row count
//     catches a lost row below the anchor whose transaction committed after
//     it. Rejected: comparing numbers only — after a short lost tail the
//     promoted sequence (WAL-logged 32 ahead) is already above the lake.
//     The lake root's _oml_deployment.json (put-if-absent, by the writer
//     only) names the deployment, so a wrong --lake is refused too.
//     The next batch is read while one commits (prefetch.go); its rows are
//     committed only when the read's own snapshot saw the identity and
//     anchors this check then sees, nothing moved, else read again.
//  7. Never ahead of a failover (durable.go, Options.Durable). A batch is cut
//     only from the part of the stable prefix whose commit records the
//     streaming standbys required by --durable-on have flushed
//     (pg_stat_replication.flush_lsn ≥ outbox.CoverLSN read after the fence
//     was seen final), and a chain head is witnessed only once they hold it.
//     Waiting is lag, never loss: DrainOnce gives up after DurableTimeout
//     with nothing cut; the loop keeps the final fences in a queue and
//     advances as the standbys catch up. A standby whose position the role
//     may not see stops the writer (configuration), never counts as flushed.
//
// Durability: the flushes a commit keeps (file store, store.File; on S3 a
// PUT that returned is durable). Each one makes an acknowledged commit
// survive a power loss, and none may go for speed. Per file (?sync=file,
// and what the default ?sync=auto does while rounds are slow or the kernel
// is older than 5.8) each is an fsync of its own:
//
//  1. the data file's bytes, before it is renamed into place (a commit must
//     never name a file a crash could lose or leave short);
//  2. the data file's directory, after the rename (the name itself);
//  3. the commit file's bytes, before it is linked as version N;
//  4. the _delta_log directory, after the link: this is the commit point —
//     the frontier cache is written after it, and `oml outbox prune` trusts
//     a commit it has read;
//  5. for a new table, each directory created on the way (tenant, kind,
//     table, _delta_log), fsynced into its parent once, so the new table's
//     path survives with its first commit;
//  6. the same for checkpoints and _last_checkpoint (a checkpoint a crash
//     could tear would be read instead of the commits it stands for) and
//     for witnessed heads (evidence the fork check relies on).
//
// In group mode (?sync=group, store.SyncGroup, and ?sync=auto while its
// rounds are fast) the same points are kept in the same order, but each is
// a wait for a syncfs(2) of the lake's filesystem that started after the
// step before it, shared by every put waiting at the time: 1 and 3 are the
// round before the rename or link, 2 and 4 the round after it, and 5 is
// the round before the publish too (it started after the mkdirs).
// Concurrent table commits (--parallel) share the rounds. In sync=auto each
// put follows one of the two protocols from start to end.
//
// What the per-commit work cut is not durability: the Parquet layout is
// built once per schema (pq.Layout), small files are put from one pooled
// buffer, and a table the start-up scan found absent is created without
// reading its log again.
//
// Tables. bronze.events and gold.lineage are appended; silver.claims and
// gold.workareas are MERGEd copy-on-write (apply.go, workareas.go): the
// files holding an affected key are rewritten in the batch's commit. A
// gold.workareas row is a sum of changes (tables.GoldWorkareaRow.Apply),
// so invariant 3 makes it equal the fold at the table's txn version.
//
// Witnesses (witness.go). After each batch the signed heads of the tenants
// it touched are published to the lake (at most once per WitnessInterval
// each), for the fork check. Publication runs beside the batches, never on
// their path, and at most one at a time: tenants touched meanwhile wait in
// witnessPending and the next publication takes every one due. A tenant is
// counted as witnessed only once its head is published; one whose
// publication failed is due again at the next. The writer waits for the
// publication in flight where a witness must not be left behind or race:
// before the fork check (which reads the witnesses and replaces the holds),
// at the end of DrainOnce (`--once` publishes everything and reports the
// forks found) and in the release of every hold (every return of DrainOnce
// and the leader loop), there bounded once the run's context has ended.
// Dropping an unfinished publication is safe: a head not witnessed is
// witnessed later on the same chain (the next publication, the next
// leader, `oml chain witness`); the lake is then as after a crash between
// a batch and its witnesses, which the synchronous publisher allowed too.
// A fork a publication finds holds the tenant at once, mid-batch too:
// applyTable asks tenantHeld just before each commit, so no table of the
// tenant commits after the hold (a commit that passed the check before is
// ordered before the finding, as it was when the batch ended first).
// Rejected: publishing at the end of each batch (measured: 21% of a
// 10,000-tenant drain's wall time, the next batch waiting on it), a
// publication per batch (they would pile up behind a slow store, each
// listing and reading the same tenants' witnesses) and stamping a tenant
// before its publication (a failure then cost a whole interval).
// A writer publishes through one witness.Publisher, which remembers the
// witness it put last per tenant: the next publication of the tenant is
// one listing from that witness on (another writer's newer witness shows
// there and is checked in full), one journal read (all tenants' in one
// query) and the two puts; a head that did not move puts nothing. Rejected:
// trusting the memory without the listing (a fork another writer
// witnessed after ours would be hidden behind our next witness for good).
//
// Pruned rows (rederive.go). `oml outbox prune` deletes rows every table has
// applied. The readers here that could need them: the replay of the newest
// batch (an interrupted batch is above the frontier cache, which prune never
// passes), gap rows and catch-ups (above the table's txn version, which
// prune never passes — unless the table was restored from an old copy or
// rewound below its prune mark: then the load refuses and the table is
// held, ThroughPruneMarkError, for `oml lake repair` to catch up; never
// a silent skip) and the rebuild of a table the lake does not hold,
// which re-derives the table's pruned rows from the journal
// (journal.DeriveOutbox) in one snapshot with the rows still there.
// Readers outside a batch (repair) use TableRowsThrough (through.go).
package lakewriter

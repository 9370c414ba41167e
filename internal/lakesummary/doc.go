// Package lakesummary keeps what `oml doctor` read of every tenant table,
// so that a run at 20,000 tables reads in full only the tables whose log
// changed since, instead of every one (issue 14: 39–74 s at 21,001 tables
// before, each table's log listed, read and decoded, and for bronze the
// data file holding its newest event).
//
// # What is kept
//
// One object, Key (_oml_summary/tables.v1 under the lake root): per table,
// what a full read found (version, checkpoint version, file and small-file
// counts, tombstone bytes with the range of their deletion times, the
// retention, the lake-writer txn version and the record of the commit that
// set it, bronze's newest event), when that read was, and a fingerprint:
// the SHA-256 of the names, sizes and modification times of the log files
// a reader replays (from the newest checkpoint on, with the
// _last_checkpoint hint) and, for bronze, of the data files the head was
// read from.
//
// # What a run does
//
// For each table it lists the log from the recorded checkpoint on (one
// List, as a reader's own first step) and stats bronze's head files: the
// same fingerprint means the log a reader would replay is the one the full
// read replayed, so what it found still holds, and the table is not read.
// Anything else — a new commit, a checkpoint written or removed, a file
// rewritten, removed or added, a hint changed, a head data file gone —
// and the table is read in full, as doctor always did, and its entry
// renewed. Doctor stores the renewed summary (Options.Write); lake status
// only reads it.
//
// # Invariants
//
//   - The summary is a cache of reads, never a source of truth. Nothing
//     that decides what is written reads it: the lake writer, oml outbox
//     prune and oml lake repair read the tables themselves; only reports
//     (doctor, lake status) use it.
//   - A summary that is absent, does not hash to its header, does not
//     parse, or was written with other thresholds degrades to full reads
//     of the tables concerned (all of them when the object is bad), never
//     to a table reported as it is not. A table that cannot be read, or
//     whose read failed anywhere, is never kept: every run reads it again,
//     so its finding reads exactly as before.
//   - The log is listed before it is read; an entry is kept only when the
//     newest commit listed is the version read, so a commit landing in
//     between makes the entry stale (read again next run), never wrong.
//   - A scrub bounds what a fingerprint cannot see (a file rewritten in
//     place keeping its size and modification time, or a summary forged by
//     someone who can write the lake — who could as well write the tables
//     themselves): every run reads in full the 1/ScrubShare of the tables
//     read in full least recently and every one older than MaxAge, and the
//     reports give the oldest full read behind what they show.
//
// # Rejected
//
//   - A summary written by the lake writer at each commit (a PostgreSQL
//     table or an object): it would put a write on the commit path issue 14
//     is cutting, still need verifying against the lake (a failover or
//     restore of the database is exactly when the lake and a database copy
//     disagree), and go stale whenever anything else writes a table
//     (maintain, repair, another engine), leaving those tables read in
//     full by every run until the writer touches them again. A cache
//     written by the reader and proven against the log serves every table,
//     whoever wrote it.
//   - Trusting a stat of the next commit only (one Stat per table): a
//     commit file rewritten in place, a checkpoint removed or the hint
//     changed would go unseen until the scrub; one List of the log from the
//     checkpoint costs about the same on a file lake and one request on S3.
//   - One recursive listing of the lake: it lists every data file too (5
//     to 10 times the objects of the logs) and cannot be split by table.
package lakesummary

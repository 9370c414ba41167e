// Package doctor owns oml's health checks: what `oml doctor` runs, how each
// check decides ok / warn / fail / skipped, and the report they make.
//
// Every check has a stable id (monitoring matches on it), a one-line
// summary, details, machine-readable data under stable snake_case keys and
// a runbook at docs/runbooks/<id>.md. The catalog, the thresholds and the
// JSON shape are documented in docs/doctor.md; keep them in step.
//
// Invariants:
//   - Run never fails as a whole and never panics out: a check that cannot
//     run is that check's fail (it could not do its job: a query error, a
//     timeout, a crash) or skipped (it was not applicable: no lake
//     configured, the database check already failed), always with the why.
//   - Every check runs under its own timeout, so one slow dependency cannot
//     hold the report hostage; a check that outlives its timeout is a fail
//     that says so.
//   - Checks are read-only with four deliberate exceptions: the lake probe
//     writes and deletes a scratch object under _oml_probe/ (put-if-absent
//     cannot be tested by reading), chain verification stores the new
//     verified heads as checkpoints (that is what keeps it incremental),
//     the lake read stores the lake summary (_oml_summary/tables.v1,
//     package lakesummary: what it read of each table, with a fingerprint
//     of the table's log, so the next run reads in full only the tables
//     whose log changed, plus a rolling scrub), and the fork check stores
//     the witness summary (_oml_summary/witnesses.v1, witness.NewestCached:
//     the witnesses it verified, so the next run verifies only those that
//     changed, plus a rolling scrub).
//     The lake-writer status takes an outbox fence, which costs one
//     transaction id.
//   - The lease, lag, horizon and dead-letter checks share one reading of
//     the lake writer's state per run, so they never contradict each other;
//     the continuity and outbox checks share one continuity comparison
//     (the outbox check uses what is prunable only when it passed).
//   - The provider chain is verified once per run, by the chain check; the
//     fork check trusts the keys that pass handed it (run.trust), and reads
//     the provider chain itself only when the chain check had none to give.
//   - The lake summary is a cache of doctor's own reads, proven against
//     each table's log on every run: a stale, absent, unparsable or
//     tampered summary costs full reads, never a finding (every check
//     built on the lake read reports what reading every table reports;
//     Options.NoSummary reads every table, the baseline its tests and
//     benchmark compare with). Nothing that writes reads it. It is read
//     beside the database check and stored in the background while the
//     checks use the read; a run returns only once it is stored.
//
// The live terminal UI over these checks is package doctor/tui.
package doctor

// Package replication reads what PostgreSQL's streaming standbys hold, so
// the lake writer and the witness publisher never get ahead of what a
// failover keeps, and so `oml doctor` can grade the durability profile.
//
// It owns three things:
//
//   - LSN, a WAL position, and how to read the position that covers every
//     commit record already inserted (CoverLSN's SQL lives in
//     internal/outbox, at the fence; the page-header correction is here).
//   - Policy, the `--durable-on auto|none|N` rule of which standbys must have
//     flushed a position before the lake may build on it, and Evaluate, which
//     applies a Policy to one reading of pg_stat_replication (Read).
//   - Profile, the cluster's replication settings (synchronous_commit,
//     synchronous_standby_names, replication slots) against the seeds'
//     production profile: synchronous quorum replication.
//
// # Why flush_lsn
//
// A promoted standby holds exactly the WAL it had flushed (it replays all of
// it before it accepts writes); WAL it had only received, or the primary had
// only sent, can be gone. pg_stat_replication.flush_lsn is the standby's own
// report of what it has flushed. replay_lsn would also be safe but lags
// behind flush for reasons that lose nothing (replay paused, a long replay
// conflict), so waiting on it would only add lag.
//
// # Which standbys count
//
// Physical walsenders in state 'streaming' that report a flush position.
// A logical walsender (a subscription) holds no copy of the cluster; a
// pg_basebackup or pg_receivewal stream without --synchronous reports no
// flush position and cannot be promoted; a standby in 'catchup' or
// 'startup' is not (yet) a failover target anyone should promote. All of
// them are listed, none of them is waited for.
//
//   - auto (the default, DefaultPolicy): every standby streaming at the time
//     of the reading. A single node, or a standby that has gone away (its
//     walsender has left pg_stat_replication), stalls nothing; `oml doctor`'s
//     replication check warns about both instead.
//   - N: at least N streaming standbys. Fewer than N streaming is waited
//     for (lag), and says how many are missing.
//   - none: never wait (and never read pg_stat_replication).
//
// # Privileges
//
// pg_stat_replication shows a walsender's details only to superusers and
// members of pg_read_all_stats (pg_monitor includes it); any other role sees
// the pid and NULL for everything else. A NULL is never read as "flushed":
// Evaluate returns a *HiddenError naming the role to grant whenever a hidden
// walsender could change the answer (auto: any; N: when the visible standbys
// do not already satisfy N).
package replication

package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/schema"
)

// ---- replication ----

// checkReplication grades the durability profile against the seeds'
// production profile: synchronous quorum replication (synchronous_commit
// on, remote_write or remote_apply, with synchronous_standby_names naming a
// quorum), under which a failover to a quorum member loses no acknowledged
// commit. Anything less warns, saying what a failover can lose; the lake
// writer's --durable-on fence keeps the lake from getting ahead of the
// standbys in every profile, but it cannot keep the journal's tail.
//
//   - warn: a single node (nothing streams; durability is one disk), only
//     asynchronous standbys, synchronous_standby_names set but
//     synchronous_commit not waiting for it, an inactive physical slot (a
//     standby that has gone away: --durable-on auto no longer waits for it),
//     walsenders this role may not see (grant pg_monitor), or a lake
//     writer role (oml_lakewriter) that may not see them;
//   - fail: commits wait for more synchronous standbys than are connected,
//     so every commit hangs.
func checkReplication(ctx context.Context, r *run, res *Result) {
	p, err := replication.ReadProfile(ctx, r.pool)
	if err != nil {
		res.fail("cannot read the replication settings: %v", err)
		return
	}
	streaming := p.Streaming()
	sync := p.SyncConnected()
	var inactive []string
	for _, s := range p.Slots {
		if !s.Active {
			inactive = append(inactive, s.Name)
		}
	}
	profile := "single-node"
	switch {
	case p.Num > 0 && p.CommitWaitsForStandbys():
		profile = "synchronous"
		if p.Method == "ANY" || p.Num > 1 {
			profile = "synchronous-quorum"
		}
	case len(streaming) > 0:
		profile = "asynchronous"
	}
	res.Data["profile"] = profile
	res.Data["synchronous_commit"] = p.SynchronousCommit
	res.Data["synchronous_standby_names"] = p.StandbyNames
	res.Data["sync_method"] = p.Method
	res.Data["sync_num"] = p.Num
	res.Data["sync_connected"] = sync
	res.Data["streaming"] = len(streaming)
	res.Data["hidden"] = p.Hidden
	res.Data["inactive_slots"] = nonNil(inactive)
	standbys := make([]map[string]any, 0, len(p.Standbys))
	for _, s := range p.Standbys {
		standbys = append(standbys, map[string]any{"name": s.Name, "client": s.Client, "pid": s.PID, "state": s.State,
			"sync_state": s.SyncState, "flush_lsn": s.Flush.String(), "replay_lsn": s.Replay.String(), "counted": s.Counts()})
		res.detail("standby %s: state %s, sync_state %s, flushed %s, replayed %s", s.Label(), s.State, s.SyncState, s.Flush, s.Replay)
	}
	res.Data["standbys"] = standbys
	res.detail("synchronous_commit = %s, synchronous_standby_names = %q", p.SynchronousCommit, p.StandbyNames)

	var warns []string
	switch {
	case p.InRecovery:
		res.raise(StatusWarn)
		warns = append(warns, "this database is a standby (in recovery): point oml at the primary")
	case p.Num > 0 && p.CommitWaitsForStandbys() && sync < p.Num:
		res.fail("commits wait for %d synchronous standby(s) (%s %d of %s) but %d is connected: every commit hangs until one comes back; restore the standby or change synchronous_standby_names",
			p.Num, p.Method, p.Num, strings.Join(p.Members, ", "), sync)
	case p.Num > 0 && !p.CommitWaitsForStandbys():
		res.raise(StatusWarn)
		warns = append(warns, fmt.Sprintf("synchronous_standby_names is set but synchronous_commit = %s does not wait for it: a failover can lose acknowledged commits; set synchronous_commit = remote_apply (or on)", p.SynchronousCommit))
	case len(streaming) == 0 && p.Hidden == 0:
		res.raise(StatusWarn)
		warns = append(warns, "single node: no standby is streaming, so durability is this machine's disk (the production profile is synchronous quorum replication); the lake writer does not wait (--durable-on auto)")
	case p.Num == 0 && len(streaming) > 0:
		res.raise(StatusWarn)
		warns = append(warns, fmt.Sprintf("asynchronous replication to %d standby(s): a failover can lose acknowledged commits (the lake writer waits for them, so the lake never gets ahead; the journal's tail can still be lost); configure a synchronous quorum", len(streaming)))
	}
	if p.Hidden > 0 {
		res.raise(StatusWarn)
		warns = append(warns, fmt.Sprintf("%d replication connection(s) are hidden from role %s: GRANT pg_monitor TO %s so their positions can be read", p.Hidden, p.Role, p.Role))
	}
	// The lake writer's own role, whoever runs doctor: a superuser running
	// doctor sees every standby while the writer would see NULLs.
	if reads, err := schema.LakeWriterReadsStandbys(ctx, r.pool); err != nil {
		res.detail("cannot tell whether %s can read the standbys' positions: %v", schema.LakeWriterRole, err)
	} else {
		res.Data["lakewriter_reads_standbys"] = reads
		if !reads {
			res.raise(StatusWarn)
			warns = append(warns, fmt.Sprintf("the lake writer role %s cannot read the standbys' positions (pg_stat_replication shows them as NULL without pg_monitor), so a lake writer logged in through it cannot judge --durable-on once a standby streams; an administrator must run: %s",
				schema.LakeWriterRole, schema.MonitorGrantSQL))
		}
	}
	if len(inactive) > 0 {
		res.raise(StatusWarn)
		warns = append(warns, fmt.Sprintf("physical replication slot(s) %s inactive: their standby is not streaming (WAL is kept for it; --durable-on auto no longer waits for it)", strings.Join(inactive, ", ")))
	}
	if res.Status == StatusFail {
		return
	}
	if len(warns) > 0 {
		res.Summary = warns[0]
		for _, w := range warns[1:] {
			res.detail("%s", w)
		}
		return
	}
	res.Summary = fmt.Sprintf("%s: %s %d of (%s), synchronous_commit = %s; %d streaming, %d acknowledging commits",
		profile, p.Method, p.Num, strings.Join(p.Members, ", "), p.SynchronousCommit, len(streaming), sync)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

package replication

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Standby is one walsender as pg_stat_replication shows it.
type Standby struct {
	PID       int32  `json:"pid"`
	Name      string `json:"name"`   // application_name (the standby's cluster_name or primary_conninfo's)
	Client    string `json:"client"` // client address; "local" for a unix socket
	State     string `json:"state"`  // streaming, catchup, startup, backup, stopping
	SyncState string `json:"sync_state"`
	// Flush is what the standby reports it has flushed (HasFlush false: it
	// reports none, e.g. pg_basebackup's WAL stream).
	Flush     LSN       `json:"flush_lsn"`
	HasFlush  bool      `json:"has_flush"`
	Replay    LSN       `json:"replay_lsn"`
	ReplyTime time.Time `json:"reply_time"`
	Logical   bool      `json:"logical"`
}

// Label names the standby for a person: its application_name, client and pid.
func (s Standby) Label() string {
	name := s.Name
	if name == "" {
		name = "(no application_name)"
	}
	return fmt.Sprintf("%s (%s, walsender pid %d)", name, s.Client, s.PID)
}

// Counts reports whether the standby is one a Policy waits for: a physical
// walsender that is streaming and reports a flush position.
func (s Standby) Counts() bool { return s.State == "streaming" && s.HasFlush && !s.Logical }

// Reading is one look at pg_stat_replication.
type Reading struct {
	Standbys []Standby `json:"standbys"` // every visible walsender
	// Hidden counts walsenders whose details the role may not see (state
	// NULL: not a superuser nor a member of pg_read_all_stats).
	Hidden int    `json:"hidden"`
	Role   string `json:"role"` // current_user, for the grant advice
}

// Streaming is the standbys a Policy waits for.
func (r Reading) Streaming() []Standby {
	var out []Standby
	for _, s := range r.Standbys {
		if s.Counts() {
			out = append(out, s)
		}
	}
	return out
}

// Read takes one reading of pg_stat_replication (on the primary).
func Read(ctx context.Context, q Querier) (Reading, error) {
	var r Reading
	rows, err := q.Query(ctx, `
SELECT r.pid, coalesce(r.application_name, ''), coalesce(host(r.client_addr), 'local'), r.state,
       coalesce(r.sync_state, ''), (r.flush_lsn - '0/0'::pg_lsn)::bigint, (r.replay_lsn - '0/0'::pg_lsn)::bigint,
       r.reply_time,
       EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical'),
       current_user
FROM pg_stat_replication r ORDER BY r.application_name, r.pid`)
	if err != nil {
		return r, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s             Standby
			state         pgtype.Text
			flush, replay pgtype.Int8
			reply         pgtype.Timestamptz
		)
		if err := rows.Scan(&s.PID, &s.Name, &s.Client, &state, &s.SyncState, &flush, &replay, &reply, &s.Logical, &r.Role); err != nil {
			return r, fmt.Errorf("read pg_stat_replication: %w", err)
		}
		if !state.Valid {
			// Details are hidden from this role; never guess them.
			r.Hidden++
			continue
		}
		s.State = state.String
		s.Flush, s.HasFlush = LSN(flush.Int64), flush.Valid
		s.Replay = LSN(replay.Int64)
		s.ReplyTime = reply.Time
		r.Standbys = append(r.Standbys, s)
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	// Role came with the rows; with none there is nothing hidden to name it for.
	return r, nil
}

// HiddenError means pg_stat_replication hides walsenders whose flush
// position would decide the answer: the role lacks pg_read_all_stats.
type HiddenError struct {
	Hidden int
	Role   string
}

func (e *HiddenError) Error() string {
	return fmt.Sprintf("role %s cannot see the flush position of %d replication connection(s) in pg_stat_replication, so it cannot tell what a failover would keep: run GRANT pg_monitor TO %s (or pg_read_all_stats), or pass --durable-on none",
		e.Role, e.Hidden, e.Role)
}

// Position is a counted standby's flush position against the one waited
// for.
type Position struct {
	Standby     string `json:"standby"` // application_name (the metrics label)
	Name        string `json:"name"`    // Standby.Label(): name, client, pid
	Flush       LSN    `json:"flush_lsn"`
	BehindBytes int64  `json:"behind_bytes"` // 0 once it holds the position
}

// Verdict is a Policy applied to one Reading for one WAL position.
type Verdict struct {
	Policy   string `json:"policy"`
	LSN      LSN    `json:"lsn"`     // the position waited for
	Durable  bool   `json:"durable"` // the policy is satisfied
	Required int    `json:"required"`
	// Flushed names the counted standbys that hold LSN; Waiting those that
	// do not (the lag, named).
	Flushed []Position `json:"flushed"`
	Waiting []Position `json:"waiting_for"`
	// Missing is how many more streaming standbys the policy needs than
	// are streaming at all (N mode).
	Missing int `json:"missing"`
	// Reason is one sentence when Durable is false.
	Reason string `json:"reason,omitempty"`
}

// Evaluate applies p to r for lsn. It returns a *HiddenError when hidden
// walsenders could change the answer.
func Evaluate(p Policy, lsn LSN, r Reading) (Verdict, error) {
	v := Verdict{Policy: p.String(), LSN: lsn, Flushed: []Position{}, Waiting: []Position{}}
	if !p.Waits() {
		v.Durable = true
		return v, nil
	}
	streaming := r.Streaming()
	for _, s := range streaming {
		pos := Position{Standby: s.Name, Name: s.Label(), Flush: s.Flush}
		if s.Flush >= lsn {
			v.Flushed = append(v.Flushed, pos)
		} else {
			pos.BehindBytes = int64(lsn - s.Flush)
			v.Waiting = append(v.Waiting, pos)
		}
	}
	sort.Slice(v.Waiting, func(i, j int) bool { return v.Waiting[i].BehindBytes > v.Waiting[j].BehindBytes })
	switch p.Mode {
	case ModeAuto:
		v.Required = len(streaming)
		if r.Hidden > 0 {
			return v, &HiddenError{Hidden: r.Hidden, Role: r.Role}
		}
		v.Durable = len(v.Waiting) == 0
		if !v.Durable {
			v.Reason = fmt.Sprintf("waiting for %s to flush WAL up to %s (every streaming standby must hold it)", names(v.Waiting), lsn)
		}
	case ModeCount:
		v.Required = p.N
		v.Durable = len(v.Flushed) >= p.N
		if v.Durable {
			return v, nil
		}
		if r.Hidden > 0 {
			return v, &HiddenError{Hidden: r.Hidden, Role: r.Role}
		}
		v.Missing = max(0, p.N-len(streaming))
		switch {
		case len(streaming) == 0:
			v.Reason = fmt.Sprintf("waiting for %d streaming standby(s) to flush WAL up to %s; none is streaming", p.N, lsn)
		case v.Missing > 0:
			v.Reason = fmt.Sprintf("waiting for %d streaming standby(s) to flush WAL up to %s; only %d streaming, %d flushed it, behind: %s",
				p.N, lsn, len(streaming), len(v.Flushed), names(v.Waiting))
		default:
			v.Reason = fmt.Sprintf("waiting for %d standby(s) to flush WAL up to %s; %d flushed it, behind: %s",
				p.N, lsn, len(v.Flushed), names(v.Waiting))
		}
	}
	return v, nil
}

func names(ls []Position) string {
	if len(ls) == 0 {
		return "-"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s at %s, %d bytes behind", l.Name, l.Flush, l.BehindBytes)
	}
	return strings.Join(parts, "; ")
}

// Wait reads pg_stat_replication every poll until p holds for lsn or
// timeout passes, and returns the last verdict (Durable false on timeout).
// A failed reading or a *HiddenError is returned at once.
func Wait(ctx context.Context, q Querier, p Policy, lsn LSN, timeout, poll time.Duration) (Verdict, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, err := Read(ctx, q)
		if err != nil {
			return Verdict{}, err
		}
		v, err := Evaluate(p, lsn, r)
		if err != nil || v.Durable || time.Now().After(deadline) {
			return v, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}

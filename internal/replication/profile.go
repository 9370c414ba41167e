package replication

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Slot is a physical replication slot: a standby that registered to keep
// WAL. An inactive one is a standby that has gone away (or not yet come).
type Slot struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
}

// Profile is the cluster's durability configuration and what is connected.
type Profile struct {
	SynchronousCommit string `json:"synchronous_commit"`
	StandbyNames      string `json:"synchronous_standby_names"`
	// Method/Num/Members parse StandbyNames: FIRST or ANY, how many, of which.
	Method     string   `json:"sync_method"`
	Num        int      `json:"sync_num"`
	Members    []string `json:"sync_members"`
	InRecovery bool     `json:"in_recovery"`
	Slots      []Slot   `json:"physical_slots"`
	Reading
}

// SyncConnected counts the standbys that currently acknowledge commits
// (sync_state sync or quorum).
func (p Profile) SyncConnected() int {
	n := 0
	for _, s := range p.Standbys {
		if s.SyncState == "sync" || s.SyncState == "quorum" {
			n++
		}
	}
	return n
}

// CommitWaitsForStandbys reports whether synchronous_commit makes a commit
// wait for the synchronous standbys (on, remote_write, remote_apply), given
// synchronous_standby_names is set.
func (p Profile) CommitWaitsForStandbys() bool {
	switch p.SynchronousCommit {
	case "on", "remote_write", "remote_apply":
		return p.Num > 0
	}
	return false
}

// ReadProfile reads the settings, the physical slots and pg_stat_replication.
func ReadProfile(ctx context.Context, q Querier) (Profile, error) {
	var p Profile
	if err := q.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'), pg_is_in_recovery()`).
		Scan(&p.SynchronousCommit, &p.StandbyNames, &p.InRecovery); err != nil {
		return p, fmt.Errorf("read the replication settings: %w", err)
	}
	p.Method, p.Num, p.Members = ParseStandbyNames(p.StandbyNames)
	rows, err := q.Query(ctx, `SELECT slot_name::text, active FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY slot_name`)
	if err != nil {
		return p, fmt.Errorf("read pg_replication_slots: %w", err)
	}
	for rows.Next() {
		var s Slot
		if err := rows.Scan(&s.Name, &s.Active); err != nil {
			rows.Close()
			return p, fmt.Errorf("read pg_replication_slots: %w", err)
		}
		p.Slots = append(p.Slots, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, fmt.Errorf("read pg_replication_slots: %w", err)
	}
	r, err := Read(ctx, q)
	if err != nil {
		return p, err
	}
	p.Reading = r
	return p, nil
}

// ParseStandbyNames reads synchronous_standby_names: "" (none),
// "FIRST n (a, b)", "n (a, b)" (FIRST), "ANY n (a, b)", or a bare list
// "a, b" (FIRST 1). Names may be double-quoted; "*" matches any standby.
// Something it cannot read gives method "?" and num 0.
func ParseStandbyNames(s string) (method string, num int, members []string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", 0, nil
	}
	method, num = "FIRST", 1
	list := s
	if i := strings.IndexByte(s, '('); i >= 0 && strings.HasSuffix(s, ")") {
		head := strings.Fields(s[:i])
		list = s[i+1 : len(s)-1]
		switch {
		case len(head) == 2 && (strings.EqualFold(head[0], "FIRST") || strings.EqualFold(head[0], "ANY")):
			method = strings.ToUpper(head[0])
			num, _ = strconv.Atoi(head[1])
		case len(head) == 1:
			num, _ = strconv.Atoi(head[0])
		default:
			return "?", 0, nil
		}
		if num < 1 {
			return "?", 0, nil
		}
	}
	for _, m := range strings.Split(list, ",") {
		m = strings.Trim(strings.TrimSpace(m), `"`)
		if m != "" {
			members = append(members, m)
		}
	}
	return method, num, members
}

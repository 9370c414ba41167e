package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Blocker is a transaction that holds the snapshot horizon back: a backend
// (in any database of the cluster) or a prepared transaction.
type Blocker struct {
	Kind        string    `json:"kind"` // "backend" or "prepared"
	PID         int32     `json:"pid,omitempty"`
	Database    string    `json:"database"`
	User        string    `json:"user"`
	Application string    `json:"application,omitempty"`
	State       string    `json:"state,omitempty"` // e.g. "idle in transaction"
	Xid         uint64    `json:"xid"`
	XactStart   time.Time `json:"xact_start"`
	QueryStart  time.Time `json:"query_start,omitempty"`
	Query       string    `json:"query,omitempty"` // truncated
	GID         string    `json:"gid,omitempty"`   // prepared transactions
}

// Age is how long the blocking transaction has been open at now.
func (b Blocker) Age(now time.Time) time.Duration { return now.Sub(b.XactStart) }

// Blockers lists the transactions whose xid is below before (typically a
// fence's Xid), oldest first: the ones the lake writer is waiting for.
// Seeing other sessions' queries needs pg_read_all_stats or superuser; when
// the role lacks it, Query and State come back empty but the xid and pid are
// still reported.
func Blockers(ctx context.Context, q Querier, before uint64, limit int) ([]Blocker, error) {
	if limit <= 0 {
		limit = 5
	}
	// backend_xid and pg_prepared_xacts.transaction are 32-bit xids; widen
	// them to 64 bits relative to before: every running xid is within 2^31 of
	// it, so the signed 32-bit difference from before's low word places it
	// (older: below before, even across an epoch wrap; newer, i.e. a
	// transaction that began after the fence: above it, so it is filtered
	// out) and it compares with xid8 values across wraparound.
	rows, err := q.Query(ctx, `
WITH raw AS (
    SELECT 'backend' AS kind, pid, coalesce(datname, '') AS db, coalesce(usename, '') AS usr,
           coalesce(application_name, '') AS app, coalesce(state, '') AS state,
           backend_xid::text::bigint AS x32, xact_start AS xs, query_start AS qs,
           left(coalesce(query, ''), 200) AS query, '' AS gid
    FROM pg_stat_activity
    WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
    UNION ALL
    SELECT 'prepared', 0, database, owner::text, '', 'prepared', transaction::text::bigint, prepared, NULL, '', gid
    FROM pg_prepared_xacts
), wide AS (
    SELECT raw.*, $1::bigint
                  + ((x32 - ($1::bigint & 4294967295) + 6442450944) % 4294967296) - 2147483648 AS x64
    FROM raw
)
SELECT kind, pid, db, usr, app, state, x64, xs, qs, query, gid
FROM wide WHERE x64 < $1
ORDER BY x64
LIMIT $2`, int64(before), limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list transactions holding the horizon: %w", err)
	}
	defer rows.Close()
	var out []Blocker
	for rows.Next() {
		var b Blocker
		var xs, qs pgtype.Timestamptz
		if err := rows.Scan(&b.Kind, &b.PID, &b.Database, &b.User, &b.Application, &b.State, &b.Xid, &xs, &qs, &b.Query, &b.GID); err != nil {
			return nil, fmt.Errorf("outbox: decode blocker: %w", err)
		}
		b.XactStart, b.QueryStart = xs.Time, qs.Time
		out = append(out, b)
	}
	return out, rows.Err()
}

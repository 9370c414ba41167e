package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The small reads of oml.outbox the lake writer makes beside the batch
// scan: is a table missing rows, does a recorded batch still hold its
// rows, is there anything past a seq, how far behind is the writer. They
// live here, with the fence and the cut, so the outbox's SQL has one home.

// RowQuerier runs a single-row query (a pool, a connection or a
// transaction).
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TableHasRows reports whether the outbox holds a row of table (tenant,
// target) in (after, through], or whether prune has deleted rows of the
// table above after (a table below its prune mark also misses those: from
// nothing they are re-derived from the journal; from a txn version below
// the mark the lake writer's load refuses and the table is held).
// Dead-lettered rows count.
func TableHasRows(ctx context.Context, q RowQuerier, tenant uuid.UUID, target string, after, through int64) (bool, error) {
	var missed bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.outbox
WHERE tenant_id = $1 AND target = $2 AND seq > $3 AND seq <= $4)
OR EXISTS (SELECT 1 FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = $2 AND through_seq > $3)`, tenant, target, after, through).Scan(&missed)
	return missed, err
}

// TableProbe names a table (tenant, target) and the seq after which
// TablesHaveRows looks for its rows (its txn version).
type TableProbe struct {
	Tenant uuid.UUID
	Target string
	After  int64
}

// probeChunk bounds the tables TablesHaveRows probes in one statement.
const probeChunk = 5000

// TablesHaveRows is TableHasRows for many tables, probeChunk a round trip
// (the lake writer's start probes every table behind the frontier: one
// statement each took minutes at 10,000 tenants). It returns the indexes
// of the tables that have rows, in order.
func TablesHaveRows(ctx context.Context, q Querier, tables []TableProbe, through int64) ([]int, error) {
	var out []int
	for base := 0; base < len(tables); base += probeChunk {
		chunk := tables[base:min(len(tables), base+probeChunk)]
		ids := make([]uuid.UUID, len(chunk))
		targets := make([]string, len(chunk))
		after := make([]int64, len(chunk))
		for i, t := range chunk {
			ids[i], targets[i], after[i] = t.Tenant, t.Target, t.After
		}
		rows, err := q.Query(ctx, `SELECT t.i - 1 FROM unnest($1::uuid[], $2::text[], $3::bigint[]) WITH ORDINALITY AS t(tenant, target, after, i)
WHERE EXISTS (SELECT 1 FROM oml.outbox o WHERE o.tenant_id = t.tenant AND o.target = t.target AND o.seq > t.after AND o.seq <= $4)
   OR EXISTS (SELECT 1 FROM oml.outbox_pruned p WHERE p.tenant_id = t.tenant AND p.target = t.target AND p.through_seq > t.after)
ORDER BY t.i`, ids, targets, after, through)
		if err != nil {
			return nil, err
		}
		idx, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, err
		}
		for _, i := range idx {
			out = append(out, base+int(i))
		}
	}
	return out, nil
}

// PendingTables counts the tables (tenant, target) the rows in (from, to]
// touch: the lake writer's loop lets a batch of about a row per table
// fill for a while longer (lakewriter/fanout.go).
func PendingTables(ctx context.Context, q RowQuerier, from, to int64) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT DISTINCT tenant_id, target FROM oml.outbox WHERE seq > $1 AND seq <= $2) t`, from, to).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the tables of the pending batch (%d, %d]: %w", from, to, err)
	}
	return n, nil
}

// TableHasLiveRows is TableHasRows leaving dead-lettered rows out: the rows
// a table would still have to apply (one indexed probe; usually none).
func TableHasLiveRows(ctx context.Context, q RowQuerier, tenant uuid.UUID, target string, after, through int64) (bool, error) {
	var missed bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.outbox o
WHERE o.tenant_id = $1 AND o.target = $2 AND o.seq > $3 AND o.seq <= $4
  AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = o.seq))
OR EXISTS (SELECT 1 FROM oml.outbox_pruned p WHERE p.tenant_id = $1 AND p.target = $2 AND p.through_seq > $3)`,
		tenant, target, after, through).Scan(&missed)
	return missed, err
}

// RangeCount is what the outbox holds of a recorded batch (start, end].
type RangeCount struct {
	Rows   int64  // rows in (start, end]
	Oldest *int64 // the oldest row's seq (nil: the outbox is empty)
	Pruned bool   // prune's mark is past start for some table
}

// CountRange counts the rows of (start, end] and says whether prune may
// explain fewer than the batch recorded.
func CountRange(ctx context.Context, q RowQuerier, start, end int64) (RangeCount, error) {
	var c RangeCount
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM oml.outbox WHERE seq > $1 AND seq <= $2), (SELECT min(seq) FROM oml.outbox),
       EXISTS (SELECT 1 FROM oml.outbox_pruned WHERE through_seq > $1)`,
		start, end).Scan(&c.Rows, &c.Oldest, &c.Pruned)
	if err != nil {
		return RangeCount{}, fmt.Errorf("count the outbox rows of batch (%d, %d]: %w", start, end, err)
	}
	return c, nil
}

// AnyAfter reports whether the outbox holds a row past seq.
func AnyAfter(ctx context.Context, q RowQuerier, seq int64) (bool, error) {
	var newer bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.outbox WHERE seq > $1)`, seq).Scan(&newer)
	return newer, err
}

// Lag is the outbox's last seq and the age in seconds of its oldest row
// past frontier (0 when there is none), for the lag metrics.
func Lag(ctx context.Context, q RowQuerier, frontier int64) (last int64, ageSeconds float64, err error) {
	err = q.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox', 'seq')::regclass), 0),
       coalesce((SELECT extract(epoch FROM now() - created_at) FROM oml.outbox WHERE seq > $1 ORDER BY seq LIMIT 1), 0)`,
		frontier).Scan(&last, &ageSeconds)
	return last, ageSeconds, err
}

// Backlog is what waits behind the frontier: the outbox rows past it and
// the dead letters not yet re-enqueued or abandoned (`oml lake status`).
type Backlog struct {
	LastSeq         int64      // the outbox sequence's last value
	Rows            int64      // outbox rows past the frontier
	OldestUnapplied *time.Time // created_at of the first of them (nil: none)
	DeadLetters     int64      // dead letters neither re-enqueued nor abandoned
	OldestDeadAt    *time.Time // the first failure among them (nil: none)
}

// ReadBacklog reads the backlog past frontier, in one statement (one
// snapshot).
func ReadBacklog(ctx context.Context, q RowQuerier, frontier int64) (Backlog, error) {
	var b Backlog
	err := q.QueryRow(ctx, `
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox', 'seq')::regclass), 0),
       (SELECT count(*) FROM oml.outbox WHERE seq > $1),
       (SELECT created_at FROM oml.outbox WHERE seq > $1 ORDER BY seq LIMIT 1),
       (SELECT count(*) FROM oml.dead_letter WHERE reenqueued_at IS NULL AND abandoned_at IS NULL),
       (SELECT min(first_failed_at) FROM oml.dead_letter WHERE reenqueued_at IS NULL AND abandoned_at IS NULL)`, frontier).
		Scan(&b.LastSeq, &b.Rows, &b.OldestUnapplied, &b.DeadLetters, &b.OldestDeadAt)
	if err != nil {
		return Backlog{}, fmt.Errorf("read the outbox backlog: %w", err)
	}
	return b, nil
}

// Table names one lake table's rows in the outbox: (tenant, target).
type Table struct {
	Tenant uuid.UUID
	Target string
}

// PruneMark reads how far `oml outbox prune` pruned table's rows
// (oml.outbox_pruned.through_seq; 0 when never). A failed read comes back
// unwrapped, for the caller to name the table its way.
func PruneMark(ctx context.Context, q RowsQuerier, table Table) (int64, error) {
	rows, err := q.Query(ctx, `SELECT through_seq FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = $2`, table.Tenant, table.Target)
	if err != nil {
		return 0, err
	}
	through, err := pgx.CollectOneRow(rows, pgx.RowTo[int64])
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return through, err
}

// PruneMarks reads every table's prune mark (PruneMark for all tables at
// once; a table never pruned is absent).
func PruneMarks(ctx context.Context, q RowsQuerier) (map[Table]int64, error) {
	rows, err := q.Query(ctx, `SELECT tenant_id, target, through_seq FROM oml.outbox_pruned`)
	if err != nil {
		return nil, fmt.Errorf("read the outbox prune marks: %w", err)
	}
	defer rows.Close()
	marks := map[Table]int64{}
	for rows.Next() {
		var t Table
		var through int64
		if err := rows.Scan(&t.Tenant, &t.Target, &through); err != nil {
			return nil, fmt.Errorf("read the outbox prune marks: %w", err)
		}
		marks[t] = through
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the outbox prune marks: %w", err)
	}
	return marks, nil
}

// IsDeadLettered reports whether outbox row seq is dead-lettered (a failed
// read reports false, with its error).
func IsDeadLettered(ctx context.Context, q RowQuerier, seq int64) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.dead_letter WHERE outbox_seq = $1)`, seq).Scan(&ok)
	return ok, err
}

// RowPayload is an outbox row's payload (jsonb, as text) and when it was
// inserted.
type RowPayload struct {
	Seq       int64
	Payload   string
	CreatedAt time.Time
}

// ReadPayload reads outbox row seq's payload (nil, nil when the row is gone:
// pruned, or never there). A failed read comes back unwrapped.
func ReadPayload(ctx context.Context, q RowQuerier, seq int64) (*RowPayload, error) {
	var r RowPayload
	err := q.QueryRow(ctx, `SELECT seq, payload::text, created_at FROM oml.outbox WHERE seq = $1`, seq).Scan(&r.Seq, &r.Payload, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// JournalCutoffs are the journal seqs around a table's outbox cutoff.
type JournalCutoffs struct {
	Head          *int64 // the tenant's last journal seq (nil: no chain)
	FirstAbove    *int64 // journal seq of the table's first row above the cutoff
	LastAtOrBelow *int64 // journal seq of the table's last row at or below it
}

// ReadJournalCutoffs maps the outbox cutoff of table (tenant, target) to
// journal seqs, leaving out the copies re-enqueued dead letters insert (an
// old journal_seq at a new seq): a tenant's other rows of one target are
// inserted in journal order under its chain lock, so their seq order is
// journal order. Index probes on (tenant_id, target, seq), in one
// statement. A failed read comes back unwrapped.
func ReadJournalCutoffs(ctx context.Context, q RowQuerier, tenant uuid.UUID, target string, cutoff int64) (JournalCutoffs, error) {
	const notCopy = ` AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.new_outbox_seq = o.seq)`
	var c JournalCutoffs
	err := q.QueryRow(ctx, `
SELECT (SELECT max(seq) FROM oml.journal WHERE tenant_id = $1),
       (SELECT o.journal_seq FROM oml.outbox o WHERE o.tenant_id = $1 AND o.target = $2 AND o.seq > $3`+notCopy+` ORDER BY o.seq LIMIT 1),
       (SELECT o.journal_seq FROM oml.outbox o WHERE o.tenant_id = $1 AND o.target = $2 AND o.seq <= $3`+notCopy+` ORDER BY o.seq DESC LIMIT 1)`,
		tenant, target, cutoff).Scan(&c.Head, &c.FirstAbove, &c.LastAtOrBelow)
	return c, err
}

package outbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// The reads behind the lake writer's check that the journal implies each
// batch row once (lakewriter/check.go) and its re-derivation of pruned rows
// (lakewriter/rederive.go).

// PrunedCopy is an outbox row that cites an event at or below its table's
// prune mark yet comes after it, with the mark.
type PrunedCopy struct {
	Seq               int64
	ThroughSeq        int64 // the mark's through_seq
	ThroughJournalSeq int64 // the mark's through_journal_seq
}

// prunedCopiesQuery returns, of the outbox rows $1, those that cite an
// event at or below their table's prune mark and come (or, for a copy
// naming a row of the same event, the row they copy comes) after it:
// seq, the mark's through_seq and through_journal_seq. (RowsKept leaves
// the same rows out of those it counts as still there.)
const prunedCopiesQuery = `
SELECT r.seq, p.through_seq, p.through_journal_seq
FROM unnest($1::bigint[]) AS w(seq)
JOIN oml.outbox r ON r.seq = w.seq
JOIN oml.outbox_pruned p ON p.tenant_id = r.tenant_id AND p.target = r.target
LEFT JOIN oml.outbox c ON c.seq = r.copy_of AND c.tenant_id = r.tenant_id AND c.target = r.target
                      AND c.journal_seq = r.journal_seq
WHERE r.journal_seq <= p.through_journal_seq AND coalesce(c.seq, r.seq) > p.through_seq`

// PrunedCopies returns, of the outbox rows seqs, the copies of rows `oml
// outbox prune` deleted (see prunedCopiesQuery): one query, a probe of the
// small oml.outbox_pruned per row.
func PrunedCopies(ctx context.Context, q RowsQuerier, seqs []int64) ([]PrunedCopy, error) {
	rows, err := q.Query(ctx, prunedCopiesQuery, seqs)
	if err != nil {
		return nil, fmt.Errorf("look for copies of pruned outbox rows in the batch: %w", err)
	}
	defer rows.Close()
	var out []PrunedCopy
	for rows.Next() {
		var c PrunedCopy
		if err := rows.Scan(&c.Seq, &c.ThroughSeq, &c.ThroughJournalSeq); err != nil {
			return nil, fmt.Errorf("look for copies of pruned outbox rows in the batch: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for copies of pruned outbox rows in the batch: %w", err)
	}
	return out, nil
}

// EarlierCopies returns, of the outbox rows seqs, those that copy an
// earlier row of the same implied identity (tenant, journal event, target,
// op, claim) which is not dead-lettered: seq → the earliest such row (one
// query; the probe is outbox_implied_once's leading columns).
//
// The probe must be that index. Without statistics on the outbox (a bulk
// load or a burst that autovacuum has not analyzed yet) the planner took
// outbox_tenant_target_seq for it instead, on (tenant, target, seq <
// r.seq), and so read every earlier row of the row's table for each
// batch row: quadratic in a table's rows, 1.5 ms a row at 2,000 rows a
// table and 15 s for one 10,000-row batch, where the identity index takes
// 5 µs; and with the seq range kept out of the index it merged two full
// scans of the outbox. The query's shape (earlierCopiesQuery) leaves the
// planner one way whatever the statistics say: per batch row, its primary
// key, then the identity index (TestEarlierCopies_NoStatistics_*).
func EarlierCopies(ctx context.Context, q RowsQuerier, seqs []int64) (map[int64]int64, error) {
	rows, err := q.Query(ctx, earlierCopiesQuery, seqs)
	if err != nil {
		return nil, fmt.Errorf("look for earlier copies of the batch's outbox rows: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var seq, first int64
		if err := rows.Scan(&seq, &first); err != nil {
			return nil, fmt.Errorf("look for earlier copies of the batch's outbox rows: %w", err)
		}
		out[seq] = first
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for earlier copies of the batch's outbox rows: %w", err)
	}
	return out, nil
}

// earlierCopiesQuery is EarlierCopies' query. Its shape pins the plan
// (see EarlierCopies): a batch row's earliest copy is a scalar subquery,
// which PostgreSQL runs per row and does not turn into a join; e.seq + 0
// keeps the seq range out of index conditions and min() from being
// rewritten into a walk of the primary key in order; and appending the
// empty string to e.target leaves outbox_tenant_target_seq only its
// tenant column, so the identity
// index (tenant, event, op) is the narrower probe even when both estimates
// are below one row and the planner would otherwise take the smaller index.
const earlierCopiesQuery = `
SELECT w.seq, f.first
FROM unnest($1::bigint[]) AS w(seq)
CROSS JOIN LATERAL (
    SELECT (SELECT min(e.seq + 0) FROM oml.outbox e
             WHERE e.tenant_id = r.tenant_id AND e.journal_seq = r.journal_seq
               AND e.target || '' = r.target AND e.op = r.op
               AND e.artifact_id IS NOT DISTINCT FROM r.artifact_id
               AND e.version IS NOT DISTINCT FROM r.version
               AND e.seq + 0 < r.seq
               AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = e.seq)) AS first
    FROM oml.outbox r WHERE r.seq = w.seq) f
WHERE f.first IS NOT NULL`

// KeptRow is what identifies an outbox row among its event's rows of one
// table: the journal event, the op and the claim ("" and 0 when none).
type KeptRow struct {
	JournalSeq int64
	Op         string
	ArtifactID string
	Version    int32
}

// RowsKept reads the rows of table (tenant, target) still in the outbox
// that stand for their event's row: not the new copy of a re-enqueued dead
// letter, and not a copy of a pruned row (PrunedCopies refuses those; the
// pruned original is what the journal implies). A failed read comes back
// unwrapped, for the caller to name the table its way.
func RowsKept(ctx context.Context, q RowsQuerier, tenant uuid.UUID, target string) ([]KeptRow, error) {
	rows, err := q.Query(ctx, `SELECT o.journal_seq, o.op, coalesce(o.artifact_id, ''), coalesce(o.version, 0) FROM oml.outbox o
LEFT JOIN oml.outbox_pruned p ON p.tenant_id = o.tenant_id AND p.target = o.target
WHERE o.tenant_id = $1 AND o.target = $2 AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.new_outbox_seq = o.seq)
  AND (p.tenant_id IS NULL OR o.copy_of IS NOT NULL OR o.journal_seq > p.through_journal_seq OR o.seq <= p.through_seq)`,
		tenant, target)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []KeptRow
	for rows.Next() {
		var k KeptRow
		if err := rows.Scan(&k.JournalSeq, &k.Op, &k.ArtifactID, &k.Version); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// CountAttempt records one more failed attempt at outbox row seq, with its
// error, in oml.outbox_attempts (so restarts do not reset the poison
// budget), and returns the attempts so far.
func CountAttempt(ctx context.Context, q RowQuerier, seq int64, failure string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
INSERT INTO oml.outbox_attempts AS a (outbox_seq, attempts, last_error) VALUES ($1, 1, $2)
ON CONFLICT (outbox_seq) DO UPDATE
SET attempts = a.attempts + 1, last_failed_at = now(), last_error = EXCLUDED.last_error
RETURNING attempts`, seq, failure).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count a failed attempt for outbox row %d: %w", seq, err)
	}
	return n, nil
}

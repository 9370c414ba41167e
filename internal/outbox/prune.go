package outbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// Pruning: deleting the outbox rows every table has applied (see doc.go,
// "Pruning"). The bounds come from the lake (each table's lake-writer txn
// version), which this package does not read: the caller
// (internal/outboxprune) passes them in.

// DefaultRetention is how old an applied row must be before prune deletes
// it (--older-than).
const DefaultRetention = 7 * 24 * time.Hour

// DefaultPruneBatch is how many rows one prune transaction deletes at most.
// Measured (BenchmarkPrune, docs/outbox.md, on a 2-core VM at load ~28):
// 1,000 rows hold their row locks 27 ms (median) for 25k rows/s; 5,000
// rows 124 ms for 30k rows/s. The shorter lock is worth the 15%.
const DefaultPruneBatch = 1000

// TableBound is one lake table's applied position: its lake-writer txn
// version ("every row for this table with seq ≤ TxnVersion is in it").
type TableBound struct {
	Tenant     uuid.UUID
	Target     string // bronze.events | silver.claims | gold.lineage | gold.workareas
	TxnVersion int64
}

// PruneOptions say what may be pruned.
type PruneOptions struct {
	// Tables are the tables the lake holds, with their txn versions. A
	// table not listed (never created, deleted, unreadable) keeps every row.
	Tables []TableBound
	// OlderThan: only rows created before now − OlderThan are deleted.
	OlderThan time.Duration
	// BatchRows bounds one transaction (default DefaultPruneBatch).
	BatchRows int
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// OnBatch, when set, is called after each committed batch (benchmarks
	// measure the transaction time with it).
	OnBatch func(PruneBatch)
}

// PruneBatch is one committed prune transaction.
type PruneBatch struct {
	Table    string        `json:"table"`
	Rows     int64         `json:"rows"`
	Duration time.Duration `json:"duration_ns"` // BEGIN to COMMIT: the longest any of its row locks was held
}

// TablePrune is what prune did (or would do) to one table's rows.
type TablePrune struct {
	Tenant     uuid.UUID  `json:"tenant"`
	Target     string     `json:"target"`
	TxnVersion int64      `json:"txn_version"`
	Through    int64      `json:"through_seq"` // rows of the table with seq ≤ this are the candidates
	Rows       int64      `json:"rows"`        // deleted (or, dry run, deletable)
	Oldest     *time.Time `json:"oldest,omitempty"`
	// StoppedBy says why Through is below the txn version, if it is.
	StoppedBy string `json:"stopped_by,omitempty"`
}

// PruneResult is a whole run.
type PruneResult struct {
	DryRun      bool          `json:"dry_run"`
	Frontier    int64         `json:"frontier"`
	Cutoff      time.Time     `json:"cutoff"` // rows created before this were eligible
	Rows        int64         `json:"rows"`
	Attempts    int64         `json:"attempt_rows"` // oml.outbox_attempts rows deleted with their rows
	Batches     int           `json:"batches"`
	MaxBatch    time.Duration `json:"max_batch_ns"`
	Tables      []TablePrune  `json:"tables"`
	KeptDead    int64         `json:"kept_dead_lettered"` // dead-lettered rows below the bounds, kept
	OldestAfter *time.Time    `json:"oldest_row_after,omitempty"`
}

// Why a table's prefix stops below its txn version.
const (
	StopFrontier = "frontier"   // the frontier cache is below the table's txn version
	StopAge      = "retention"  // a row younger than the retention
	StopCopy     = "reenqueued" // a re-enqueued dead letter's copy (kept: DeriveOutbox cannot re-derive it)
	StopEvent    = "event"      // an event whose rows straddle the bound (its rows go together)
	// An open dead letter of a copy of a pruned row (the lake writer refused
	// it: it cites an event at or below the table's prune mark and came
	// after it). Kept, and everything after it, until it is abandoned: were
	// the mark to move past it, its re-enqueue would no longer be refused.
	StopRefusedCopy = "refused-copy"
)

// Prune deletes, for every table in opts.Tables, the prefix of its outbox
// rows that the table has applied and that is older than the retention, in
// transactions of at most BatchRows rows each. It never deletes:
//   - a row above its table's txn version or above the frontier cache
//     (read here, fresh, after the caller read the txn versions: both only
//     grow, so the older reading is the safe one);
//   - a dead-lettered row (open, re-enqueued or abandoned), or a row
//     younger than the retention, or anything after such a younger row in
//     the table's seq order;
//   - a re-enqueued copy, or anything after one (the rows of a table
//     deleted are always a seq prefix of the table's rows, apart from the
//     dead-lettered rows left in it, which are never applied: so the rows a
//     rebuild must re-derive are exactly the journal-implied rows before
//     the first row still there);
//   - part of an event: an event whose rows for the table straddle the
//     bound keeps all of them (reconcile's cutoff mapping reads them).
//
// A deleted row's oml.outbox_attempts row goes with it (it failed before
// and was applied since: a row still inside its retry budget is never
// applied, so never a candidate). Each transaction also raises the
// table's oml.outbox_pruned.through_seq, the readers' cue to re-derive,
// and its through_journal_seq, the last event whose rows of the table all
// went: a row citing it or an earlier event that comes later is not its
// event's (the lake writer's row check refuses it, docs/security.md).
func Prune(ctx context.Context, db Beginner, q Querier, opts PruneOptions) (PruneResult, error) {
	if opts.OlderThan < 0 {
		return PruneResult{}, errors.New("outbox prune: the retention must not be negative")
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultPruneBatch
	}
	res := PruneResult{DryRun: opts.DryRun, Tables: []TablePrune{}}
	fr, err := ReadFrontier(ctx, q)
	if err != nil {
		return res, fmt.Errorf("outbox prune: %w", err)
	}
	res.Frontier = fr.Seq
	res.Cutoff = fr.Now.Add(-opts.OlderThan)
	tables := append([]TableBound(nil), opts.Tables...)
	sort.Slice(tables, func(i, j int) bool {
		if tables[i].Tenant != tables[j].Tenant {
			return tables[i].Tenant.String() < tables[j].Tenant.String()
		}
		return tables[i].Target < tables[j].Target
	})
	for _, t := range tables {
		tp, err := pruneBound(ctx, q, t, res.Frontier, res.Cutoff)
		if err != nil {
			return res, err
		}
		if tp.Through <= 0 {
			continue
		}
		if opts.DryRun {
			if err := q.QueryRow(ctx, `SELECT count(*), min(o.created_at) FROM oml.outbox o
WHERE o.tenant_id = $1 AND o.target = $2 AND o.seq <= $3
  AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = o.seq)`, t.Tenant, t.Target, tp.Through).Scan(&tp.Rows, &tp.Oldest); err != nil {
				return res, fmt.Errorf("outbox prune: count the rows of %s/%s: %w", t.Tenant, t.Target, err)
			}
		} else {
			var after int64
			for {
				b, attempts, oldest, last, err := pruneBatch(ctx, db, t, after, tp.Through, opts.BatchRows)
				if err != nil {
					return res, err
				}
				after = last
				if b.Rows == 0 {
					break
				}
				if tp.Oldest == nil {
					tp.Oldest = oldest
				}
				tp.Rows += b.Rows
				res.Attempts += attempts
				res.Batches++
				res.MaxBatch = max(res.MaxBatch, b.Duration)
				if opts.OnBatch != nil {
					opts.OnBatch(b)
				}
				if b.Rows < int64(opts.BatchRows) {
					break
				}
			}
		}
		if tp.Rows > 0 {
			res.Rows += tp.Rows
			res.Tables = append(res.Tables, tp)
		}
	}
	if err := q.QueryRow(ctx, `SELECT created_at FROM oml.outbox ORDER BY seq LIMIT 1`).Scan(&res.OldestAfter); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, fmt.Errorf("outbox prune: read the oldest row left: %w", err)
	}
	if err := q.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter d JOIN oml.outbox o ON o.seq = d.outbox_seq WHERE o.seq <= $1`,
		res.Frontier).Scan(&res.KeptDead); err != nil {
		return res, fmt.Errorf("outbox prune: count the dead-lettered rows kept: %w", err)
	}
	return res, nil
}

// pruneBound computes the end of the prunable prefix of one table's rows:
// min(txn version, frontier), lowered to before the first row that stops
// it (too young, a re-enqueued copy) and to the start of an event that
// straddles it.
func pruneBound(ctx context.Context, q Querier, t TableBound, frontier int64, cutoff time.Time) (TablePrune, error) {
	tps, err := pruneBounds(ctx, q, []TableBound{t}, frontier, cutoff)
	if err != nil {
		return TablePrune{}, err
	}
	return tps[0], nil
}

// pruneBoundsSQL computes the bound of every table given ($1 tenants, $2
// targets, $3 min(txn version, frontier); $4 the cutoff), in one
// statement: a table's bound was three or four queries, and `oml doctor`
// asks for every table's (63,000 round trips at 21,000 tables). Per table:
//
//   - stop: the first row at or below the bound that stops the prefix. The
//     scan walks the table's rows in seq order (index
//     outbox_tenant_target_seq) and ends at the first young row,
//     re-enqueued copy or refused copy of a pruned row (still open: see
//     StopRefusedCopy); rows already pruned are gone, so a run walks what
//     it is about to delete, once.
//   - above_j, below_j: an event whose rows for this table straddle the
//     bound (after the stop) keeps them all: the journal seq of the first
//     row above the bound and of the last at or below it;
//   - before: when they are one event, the last row before that event.
const pruneBoundsSQL = `
WITH t AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) WITH ORDINALITY AS t(tenant_id, target, through, i)
), s AS (
  SELECT t.*, st.seq AS stop, st.young, st.refused,
         CASE WHEN st.seq IS NOT NULL THEN st.seq - 1 ELSE t.through END AS bound
    FROM t LEFT JOIN LATERAL (
      SELECT o.seq, o.created_at >= $4 AS young, r.refused FROM oml.outbox o
      LEFT JOIN oml.outbox_pruned pm ON pm.tenant_id = o.tenant_id AND pm.target = o.target
      CROSS JOIN LATERAL (SELECT o.copy_of IS NULL AND o.seq > pm.through_seq AND o.journal_seq <= pm.through_journal_seq
                                 AND EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = o.seq AND d.abandoned_at IS NULL) AS refused) r
      WHERE o.tenant_id = t.tenant_id AND o.target = t.target AND o.seq <= t.through
        AND (o.created_at >= $4 OR EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.new_outbox_seq = o.seq) OR r.refused)
      ORDER BY o.seq LIMIT 1) st ON t.through > 0
), e AS (
  SELECT s.*, ev.above_j, ev.below_j
    FROM s LEFT JOIN LATERAL (SELECT
      (SELECT journal_seq FROM oml.outbox WHERE tenant_id = s.tenant_id AND target = s.target AND seq > s.bound ORDER BY seq LIMIT 1) AS above_j,
      (SELECT journal_seq FROM oml.outbox WHERE tenant_id = s.tenant_id AND target = s.target AND seq <= s.bound ORDER BY seq DESC LIMIT 1) AS below_j
    ) ev ON s.bound > 0
)
SELECT e.i, e.stop, e.young, e.refused, e.above_j, e.below_j, bf.before, e.tenant_id, e.target,
       -- The bound itself (what boundChunk makes of the columns before
       -- it), for prunableSQL.
       CASE WHEN e.above_j = e.below_j THEN coalesce(bf.before, 0) ELSE e.bound END AS final
  FROM e CROSS JOIN LATERAL (SELECT CASE WHEN e.above_j = e.below_j THEN
         (SELECT seq FROM oml.outbox WHERE tenant_id = e.tenant_id AND target = e.target AND seq <= e.bound AND journal_seq <> e.below_j
           ORDER BY seq DESC LIMIT 1) END AS before) bf
 ORDER BY e.i`

// boundsChunk bounds the tables one pruneBoundsSQL statement computes.
const boundsChunk = 5000

// pruneBounds is pruneBound for many tables, boundsChunk per statement;
// the result is in the order of tables.
func pruneBounds(ctx context.Context, q Querier, tables []TableBound, frontier int64, cutoff time.Time) ([]TablePrune, error) {
	out := startBounds(tables, frontier)
	for lo := 0; lo < len(out); lo += boundsChunk {
		if err := boundChunk(ctx, q, out[lo:min(lo+boundsChunk, len(out))], cutoff); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// startBounds are the tables' bounds before pruneBoundsSQL lowers them:
// min(txn version, frontier).
func startBounds(tables []TableBound, frontier int64) []TablePrune {
	out := make([]TablePrune, len(tables))
	for i, t := range tables {
		out[i] = TablePrune{Tenant: t.Tenant, Target: t.Target, TxnVersion: t.TxnVersion, Through: min(t.TxnVersion, frontier)}
		if t.TxnVersion > frontier {
			out[i].StoppedBy = StopFrontier
		}
	}
	return out
}

// boundsArgs are pruneBoundsSQL's $1–$3 for tps.
func boundsArgs(tps []TablePrune) (tenants []pgtype.UUID, targets []string, through []int64) {
	tenants, targets, through = make([]pgtype.UUID, len(tps)), make([]string, len(tps)), make([]int64, len(tps))
	for i, tp := range tps {
		tenants[i], targets[i], through[i] = pgUUID(tp.Tenant), tp.Target, tp.Through
	}
	return tenants, targets, through
}

func boundChunk(ctx context.Context, q Querier, tps []TablePrune, cutoff time.Time) error {
	tenants, targets, through := boundsArgs(tps)
	rows, err := q.Query(ctx, pruneBoundsSQL, tenants, targets, through, cutoff)
	if err != nil {
		return fmt.Errorf("outbox prune: find where the prefix of %d table(s) stops: %w", len(tps), err)
	}
	defer rows.Close()
	for rows.Next() {
		var i, final int64
		var stop, aboveJ, belowJ, before *int64
		var young, refused *bool
		if err := rows.Scan(&i, &stop, &young, &refused, &aboveJ, &belowJ, &before, nil, nil, &final); err != nil {
			return fmt.Errorf("outbox prune: read the bound of a table: %w", err)
		}
		tp := &tps[i-1]
		if stop != nil {
			tp.Through = *stop - 1
			switch {
			case young != nil && *young:
				tp.StoppedBy = StopAge
			case refused != nil && *refused:
				tp.StoppedBy = StopRefusedCopy
			default:
				tp.StoppedBy = StopCopy
			}
		}
		if tp.Through > 0 && aboveJ != nil && belowJ != nil && *aboveJ == *belowJ {
			tp.Through, tp.StoppedBy = 0, StopEvent
			if before != nil {
				tp.Through = *before
			}
		}
		// prunableSQL counts below the statement's own bound: it must be
		// this one.
		if final != tp.Through {
			return fmt.Errorf("outbox prune: the bound of %s/%s is %d, but the statement says %d (a bug in oml; please report it)", tp.Tenant, tp.Target, tp.Through, final)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("outbox prune: find where the prefix of %d table(s) stops: %w", len(tps), err)
	}
	return nil
}

// pruneBatchSQL deletes the next n prunable rows of one table (after $5,
// the previous batch's last seq, and ≤ $3; not dead-lettered; and the rest
// of the last one's event) and their
// attempt counters, and raises the table's prune mark, in one statement.
// Starting after the previous batch matters: the rows it deleted are dead
// index entries until vacuum, and an index scan from the table's start
// would step over all of them again (measured: each batch slower than the
// last, 224 ms median and 616 ms worst per 5,000 rows over 1M). And the
// seqs go in as an array (= ANY (ARRAY(...))): with "seq IN (subquery)"
// the planner chose a hash semi join over a sequential scan of the whole
// outbox for every batch (EXPLAIN ANALYZE: 890 ms per 5,000 rows of 200k).
const pruneBatchSQL = `
WITH pick AS (
  SELECT c.seq, c.journal_seq FROM oml.outbox c
   WHERE c.tenant_id = $1 AND c.target = $2 AND c.seq > $5 AND c.seq <= $3
     AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = c.seq)
   ORDER BY c.seq LIMIT $4
), upto AS (
  -- The batch takes the rest of its last event's rows too (the bound never
  -- splits an event), so no batch ends inside an event: an interrupted run
  -- leaves the mark on an event whose rows all went.
  SELECT coalesce((SELECT max(e.seq) FROM oml.outbox e
                    WHERE e.tenant_id = $1 AND e.target = $2 AND e.seq <= $3
                      AND e.journal_seq = (SELECT max(journal_seq) FROM pick)), 0) AS seq
), gone AS (
  DELETE FROM oml.outbox o
   WHERE o.seq = ANY (ARRAY(SELECT c.seq FROM oml.outbox c
                    WHERE c.tenant_id = $1 AND c.target = $2 AND c.seq > $5 AND c.seq <= (SELECT seq FROM upto)
                      AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = c.seq)
                    ORDER BY c.seq))
  RETURNING o.seq, o.created_at, o.journal_seq
), att AS (
  DELETE FROM oml.outbox_attempts a USING gone WHERE a.outbox_seq = gone.seq RETURNING 1
), last AS (
  SELECT max(seq) AS seq, max(journal_seq) AS journal_seq, count(*) AS n FROM gone
), mark AS (
  INSERT INTO oml.outbox_pruned AS p (tenant_id, target, through_seq, rows_pruned, through_journal_seq)
  SELECT $1, $2, l.seq, l.n,
         -- The last event whose rows all went: the batch's last event, unless
         -- rows of it are left after the batch (kept dead-lettered): then the
         -- one before it.
         l.journal_seq - CASE WHEN EXISTS (SELECT 1 FROM oml.outbox r
                                            WHERE r.tenant_id = $1 AND r.target = $2
                                              AND r.journal_seq = l.journal_seq AND r.seq > l.seq)
                              THEN 1 ELSE 0 END
    FROM last l WHERE l.n > 0
  ON CONFLICT (tenant_id, target) DO UPDATE
     SET through_seq = greatest(p.through_seq, EXCLUDED.through_seq),
         through_journal_seq = greatest(p.through_journal_seq, EXCLUDED.through_journal_seq),
         rows_pruned = p.rows_pruned + EXCLUDED.rows_pruned, pruned_at = now()
  RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM att), (SELECT min(created_at) FROM gone), (SELECT coalesce(max(seq), 0) FROM gone)`

func pruneBatch(ctx context.Context, db Beginner, t TableBound, after, through int64, n int) (PruneBatch, int64, *time.Time, int64, error) {
	b := PruneBatch{Table: t.Tenant.String() + "/" + t.Target}
	start := time.Now()
	tx, err := db.Begin(ctx)
	if err != nil {
		return b, 0, nil, 0, fmt.Errorf("outbox prune: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var attempts, last int64
	var oldest *time.Time
	if err := tx.QueryRow(ctx, pruneBatchSQL, t.Tenant, t.Target, through, n, after).Scan(&b.Rows, &attempts, &oldest, &last); err != nil {
		return b, 0, nil, 0, fmt.Errorf("outbox prune: delete rows of %s: %w", b.Table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return b, 0, nil, 0, fmt.Errorf("outbox prune: commit: %w", err)
	}
	b.Duration = time.Since(start)
	return b, attempts, oldest, last, nil
}

// Prunable is what `oml doctor` reports: how many tables have rows prune
// would delete with no retention, and the creation time of the oldest of
// them (nil: none). It walks what a prune would walk to find each table's
// bound, and reads one row per table; it deletes nothing. Both are set
// statements over every table (boundsChunk at a time): one query per
// table took most of a doctor run at 21,000 tables.
//
// On a pool each chunk runs in a read-only transaction of its own with
// JIT compilation off, prunableParallel chunks at once: their cost
// estimate at thousands of tables passes jit_above_cost, and compiling
// them took longer than running them (EXPLAIN ANALYZE, 5,000 tables:
// 2.3 s with JIT, of which 1.3 s JIT emission; 0.46 s without); and one
// after the other they were the last thing a doctor run waited for at
// 28,000 tables. The chunks never shared a snapshot (read committed: each
// statement takes its own), so running them side by side changes nothing
// they see. On a transaction or a connection they run in turn, as they
// are given (a caller's transaction keeps its own settings).
func Prunable(ctx context.Context, q Querier, tables []TableBound) (oldest *time.Time, n int, err error) {
	fr, err := ReadFrontier(ctx, q)
	if err != nil {
		return nil, 0, fmt.Errorf("outbox: %w", err)
	}
	type part struct {
		oldest *time.Time
		n      int
	}
	parts := make([]part, (len(tables)+boundsChunk-1)/boundsChunk)
	pool, onPool := q.(*pgxpool.Pool) // not a *pgx.Conn: one connection runs one statement at a time
	var g errgroup.Group
	g.SetLimit(1)
	if onPool {
		g.SetLimit(prunableParallel)
	}
	for c := range parts {
		chunk := tables[c*boundsChunk : min((c+1)*boundsChunk, len(tables))]
		g.Go(func() (err error) {
			cq := q
			if onPool {
				tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
				if err != nil {
					return fmt.Errorf("outbox: begin: %w", err)
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
					return fmt.Errorf("outbox: turn JIT off: %w", err)
				}
				cq = tx
			}
			parts[c].oldest, parts[c].n, err = prunableChunk(ctx, cq, chunk, fr)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for _, p := range parts {
		n += p.n
		if p.oldest != nil && (oldest == nil || p.oldest.Before(*oldest)) {
			oldest = p.oldest
		}
	}
	return oldest, n, nil
}

// prunableParallel bounds the chunks Prunable runs at once on a pool, each
// on a connection of its own (oml doctor's pool has 8, shared with its
// other checks).
const prunableParallel = 4

// prunableChunk is Prunable of at most boundsChunk tables, in one
// statement (prunableSQL): their bounds, and the oldest row below each.
func prunableChunk(ctx context.Context, q Querier, tables []TableBound, fr FrontierRow) (oldest *time.Time, n int, err error) {
	tenants, targets, through := boundsArgs(startBounds(tables, fr.Seq))
	if err := q.QueryRow(ctx, prunableSQL, tenants, targets, through, fr.Now).Scan(&n, &oldest); err != nil {
		return nil, 0, fmt.Errorf("outbox: read the oldest prunable row of %d table(s): %w", len(tables), err)
	}
	return oldest, n, nil
}

// pgUUID is id as pgx encodes it straight to binary: a uuid.UUID goes
// through its driver.Valuer (formatted as text, then parsed back), 6% of
// a doctor run's CPU at 28,000 tables for the prune bounds' arrays.
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// prunableSQL counts the tables (pruneBoundsSQL's arguments) with a row
// at or below their bound (its final column) that is not dead-lettered,
// and the oldest such row's creation time: the bounds and that row in
// one statement (the row was a second one, over arrays built from the
// bounds: a third of the outbox check's time in PostgreSQL).
const prunableSQL = `WITH b AS (` + pruneBoundsSQL + `)
SELECT count(f.created_at), min(f.created_at)
  FROM b CROSS JOIN LATERAL (SELECT o.created_at FROM oml.outbox o
   WHERE o.tenant_id = b.tenant_id AND o.target = b.target AND o.seq <= b.final
     AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = o.seq)
   ORDER BY o.seq LIMIT 1) f
 WHERE b.final > 0`

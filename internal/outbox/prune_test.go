package outbox_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

var provider = uuid.MustParse("00000000-0000-0000-0000-000000000000")

// plantEvents adds filler journal events 2..n of the provider chain for
// outbox rows to name (seq 1 is the template's).
func plantEvents(t testing.TB, pool *pgxpool.Pool, n int) {
	t.Helper()
	for s := 2; s <= n; s++ {
		_, err := pool.Exec(context.Background(), `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT '00000000-0000-0000-0000-000000000000', $1::bigint, (SELECT hash FROM oml.journal WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND seq = $1::bigint - 1),
       sha256($1::bigint::text::bytea), decode(repeat('00', 64), 'hex'), 'filler', 'tenant.created', '{}', now()`, s)
		require.NoError(t, err)
	}
}

// rowsOf inserts one outbox row per journal seq given, in order, and
// returns their seqs. They are silver.claims retracts of distinct claims
// (a simulation ending several claims has several rows for one event; an
// identity may appear once: outbox_implied_once).
func rowsOf(t testing.TB, pool *pgxpool.Pool, jseqs ...int64) []int64 {
	t.Helper()
	var out []int64
	for i, j := range jseqs {
		var s int64
		require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
VALUES ($1, $2, 'silver.claims', 'retract', $3, 1, '{}') RETURNING seq`, provider, j, fmt.Sprintf("a%d", i)).Scan(&s))
		out = append(out, s)
	}
	return out
}

func left(t testing.TB, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq FROM oml.outbox ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var s int64
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

func setFrontier(t testing.TB, pool *pgxpool.Pool, f int64) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE oml.lake_frontier SET frontier = $1`, f)
	require.NoError(t, err)
}

// The bound of a table's prefix: min(txn version, frontier), never through
// part of an event (an event whose rows straddle it keeps them all), and a
// table not listed keeps everything; the prune mark records the end.
func TestPrune_BoundIsTheTxnVersionTheFrontierAndWholeEvents(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	plantEvents(t, pool, 4)
	s := rowsOf(t, pool, 1, 2, 3, 3, 3, 4)
	setFrontier(t, pool, s[5])
	tables := func(v int64) []outbox.TableBound {
		return []outbox.TableBound{{Tenant: provider, Target: "silver.claims", TxnVersion: v}}
	}

	// Not listed: nothing.
	res, err := outbox.Prune(ctx, pool, pool, outbox.PruneOptions{})
	require.NoError(t, err)
	require.Zero(t, res.Rows)

	// The txn version falls inside event 3 (rows s[2..4]): only events 1
	// and 2 go.
	res, err = outbox.Prune(ctx, pool, pool, outbox.PruneOptions{Tables: tables(s[3]), BatchRows: 1})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, 2, res.Batches, "one row per batch")
	require.Equal(t, outbox.StopEvent, res.Tables[0].StoppedBy)
	require.Equal(t, s[2:], left(t, pool))
	var mark int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT through_seq FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = 'silver.claims'`, provider).Scan(&mark))
	require.Equal(t, s[1], mark)

	// The frontier below the txn version bounds it.
	setFrontier(t, pool, s[4])
	res, err = outbox.Prune(ctx, pool, pool, outbox.PruneOptions{Tables: tables(s[5])})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Rows)
	require.Equal(t, outbox.StopFrontier, res.Tables[0].StoppedBy)
	require.Equal(t, s[5:], left(t, pool))

	_, err = outbox.Prune(ctx, pool, pool, outbox.PruneOptions{Tables: tables(s[5]), OlderThan: -time.Second})
	require.Error(t, err)
}

// The prune mark's event: through_journal_seq is the last event whose rows
// of the table all went. A batch takes the rest of its last row's event, so
// a run interrupted after its first batch (batches of 3 rows; event 3 has
// rows s[2..4]) leaves the mark on event 3 with every row of it gone; a
// dead-lettered row kept at the end of an event (event 6's s[8]) holds the
// mark on the event before (its re-enqueued copy is judged by it); and the
// mark never goes down. The lake writer refuses, as a copy made after the
// prune, a row citing an event at or below the mark (docs/security.md), so
// a mark on an event with rows still to apply would dead-letter legitimate
// rows, and a batch ending inside an event would leave copies of that
// event's pruned rows unrefused.
func TestPrune_MarkNamesTheLastEventWhoseRowsAllWent(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	plantEvents(t, pool, 6)
	s := rowsOf(t, pool, 1, 2, 3, 3, 3, 4, 5, 6, 6)
	setFrontier(t, pool, s[8])
	tables := []outbox.TableBound{{Tenant: provider, Target: "silver.claims", TxnVersion: s[8]}}
	mark := func() (seq, jseq int64) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT through_seq, through_journal_seq FROM oml.outbox_pruned
WHERE tenant_id = $1 AND target = 'silver.claims'`, provider).Scan(&seq, &jseq))
		return seq, jseq
	}

	// Interrupted after the first batch: events 1, 2 and all of 3.
	cctx, cancel := context.WithCancel(ctx)
	_, err := outbox.Prune(cctx, pool, pool, outbox.PruneOptions{Tables: tables, BatchRows: 3,
		OnBatch: func(outbox.PruneBatch) { cancel() }})
	require.Error(t, err, "the run stops after its first batch")
	require.Equal(t, s[5:], left(t, pool), "the batch took the rest of event 3")
	seq, jseq := mark()
	require.Equal(t, s[4], seq)
	require.EqualValues(t, 3, jseq)
	silver := outbox.Table{Tenant: provider, Target: "silver.claims"}
	got, err := outbox.PruneMark(ctx, pool, silver)
	require.NoError(t, err)
	require.Equal(t, s[4], got, "PruneMark reads the mark")
	none, err := outbox.PruneMark(ctx, pool, outbox.Table{Tenant: provider, Target: "bronze.events"})
	require.NoError(t, err)
	require.Zero(t, none, "a table never pruned is at 0")
	marks, err := outbox.PruneMarks(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, map[outbox.Table]int64{silver: s[4]}, marks)

	// Event 6's last row is dead-lettered: kept, and the mark stays on
	// event 5.
	_, err = pool.Exec(ctx, `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, version, payload,
                             attempts, first_failed_at, last_failed_at, error, skipped_seq)
SELECT seq, tenant_id, journal_seq, target, op, artifact_id, version, payload, 3, now(), now(), 'test', 1 FROM oml.outbox WHERE seq = $1`, s[8])
	require.NoError(t, err)
	_, err = outbox.Prune(ctx, pool, pool, outbox.PruneOptions{Tables: tables, BatchRows: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{s[8]}, left(t, pool), "the dead-lettered row is kept")
	seq, jseq = mark()
	require.Equal(t, s[7], seq)
	require.EqualValues(t, 5, jseq, "a row of event 6 is left (dead-lettered): the mark names event 5")

	// Nothing more to prune: the mark stays.
	_, err = outbox.Prune(ctx, pool, pool, outbox.PruneOptions{Tables: tables})
	require.NoError(t, err)
	seq, jseq = mark()
	require.Equal(t, s[7], seq)
	require.EqualValues(t, 5, jseq)
}

// BenchmarkPrune measures oml outbox prune over 1,000,000 applied outbox
// rows of about 340 bytes (silver retracts of distinct claims: an outbox
// identity may appear once) (-rows to change it): rows/s, and the longest a
// batch transaction held its row locks (BEGIN to COMMIT of the batch that
// took longest; nothing else waits on those locks except a writer touching
// the same rows, which nothing does).
//
//	go test -run '^$' -bench BenchmarkPrune -benchtime 1x ./internal/outbox/
func BenchmarkPrune(b *testing.B) {
	ctx := context.Background()
	pool := testdb.New(b).Pool(b)
	for _, batch := range []int{outbox.DefaultPruneBatch, 5000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var total time.Duration
			var rows int64
			var durs []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var last int64
				require.NoError(b, pool.QueryRow(ctx, `
WITH ins AS (
  INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
  SELECT '00000000-0000-0000-0000-000000000000', 1, 'silver.claims', 'retract', 'art-' || $2::text || '-' || g, 1,
         jsonb_build_object('state', 'demoted', 'by', 'bench', 'reason', repeat('x', 260))
  FROM generate_series(1, $1) g RETURNING seq)
SELECT max(seq) FROM ins`, *benchRows, fmt.Sprintf("%d-%d", batch, i)).Scan(&last))
				setFrontier(b, pool, last)
				_, err := pool.Exec(ctx, `VACUUM ANALYZE oml.outbox`)
				require.NoError(b, err)
				b.StartTimer()
				start := time.Now()
				res, err := outbox.Prune(ctx, pool, pool, outbox.PruneOptions{
					Tables:    []outbox.TableBound{{Tenant: provider, Target: "silver.claims", TxnVersion: last}},
					BatchRows: batch,
					OnBatch:   func(pb outbox.PruneBatch) { durs = append(durs, pb.Duration) },
				})
				total += time.Since(start)
				require.NoError(b, err)
				require.EqualValues(b, *benchRows, res.Rows)
				rows += res.Rows
			}
			sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
			b.ReportMetric(float64(rows)/total.Seconds(), "rows/s")
			b.ReportMetric(float64(durs[len(durs)-1].Microseconds())/1000, "max-batch-ms")
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-batch-ms")
			b.ReportMetric(float64(len(durs))/float64(b.N), "batches/op")
		})
	}
}

var benchRows = flagInt("rows", 1_000_000, "BenchmarkPrune: applied outbox rows per run")

// prunableFixture is a database with three events of the provider's in
// its journal; row inserts an outbox row of the provider's, age older
// than now, and returns its seq.
func prunableFixture(t *testing.T) (pool *pgxpool.Pool, now time.Time, row func(target, op string, jseq int64, age time.Duration) int64) {
	t.Helper()
	pool = testdb.New(t).Pool(t)
	plantEvents(t, pool, 3)
	now = time.Now()
	return pool, now, func(target, op string, jseq int64, age time.Duration) int64 {
		t.Helper()
		var s int64
		require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload, created_at)
VALUES ($1, $2, $3, $4, $5, 1, '{}', $6) RETURNING seq`, provider, jseq, target, op, uuid.NewString(), now.Add(-age)).Scan(&s))
		return s
	}
}

// Prunable computes every table's bound, and the oldest prunable row, in
// set statements over all the tables: each table's result is its own. The
// table with the oldest rows here (silver) is not prunable at all (its txn
// version falls inside its first event), so the oldest prunable row is
// bronze's; a table that took another's bound, or a bound that ignored its
// event, would name silver's.
func TestPrunable_ManyTablesAtOnce_EachBoundIsItsOwn(t *testing.T) {
	ctx := context.Background()
	pool, now, row := prunableFixture(t)
	day := 24 * time.Hour
	s1 := row("silver.claims", "retract", 1, 10*day)
	row("silver.claims", "retract", 1, 10*day) // event 1 has two silver rows: a bound at s1 straddles it
	row("bronze.events", "append", 2, 5*day)
	b2 := row("bronze.events", "append", 3, 4*day)
	g1 := row("gold.lineage", "materialize", 2, day)
	setFrontier(t, pool, g1)
	bound := func(target string, v int64) outbox.TableBound {
		return outbox.TableBound{Tenant: provider, Target: target, TxnVersion: v}
	}
	oldest, n, err := outbox.Prunable(ctx, pool, []outbox.TableBound{bound("silver.claims", s1), bound("bronze.events", b2), bound("gold.lineage", g1)})
	require.NoError(t, err)
	require.Equal(t, 2, n, "bronze and gold")
	require.NotNil(t, oldest)
	require.WithinDuration(t, now.Add(-5*day), *oldest, time.Second, "bronze's first row")
}

// Prunable over more tables than one statement takes (boundsChunk): the
// chunks run side by side on the pool, and the count and the oldest row
// are over all of them. The prunable tables sit in the first and the
// third chunk, the oldest row in the third; the tables between have no
// rows.
func TestPrunable_TablesInSeveralChunks_CountAndOldestOverAllOfThem(t *testing.T) {
	ctx := context.Background()
	pool, now, row := prunableFixture(t)
	day := 24 * time.Hour
	g := row("gold.lineage", "materialize", 1, 2*day)
	b := row("bronze.events", "append", 2, 6*day)
	setFrontier(t, pool, b)
	bounds := make([]outbox.TableBound, 2*outbox.BoundsChunk+10)
	for i := range bounds {
		bounds[i] = outbox.TableBound{Tenant: uuid.New(), Target: "silver.claims", TxnVersion: b}
	}
	bounds[3] = outbox.TableBound{Tenant: provider, Target: "gold.lineage", TxnVersion: g}
	bounds[len(bounds)-1] = outbox.TableBound{Tenant: provider, Target: "bronze.events", TxnVersion: b}
	oldest, n, err := outbox.Prunable(ctx, pool, bounds)
	require.NoError(t, err)
	require.Equal(t, 2, n, "gold (first chunk) and bronze (third)")
	require.NotNil(t, oldest)
	require.WithinDuration(t, now.Add(-6*day), *oldest, time.Second, "bronze's row, in the last chunk")
}

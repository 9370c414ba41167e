package lakewriter_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// splitReadBacklog loads a backlog whose reads in parts have poison rows
// in every part: payloads forged near the start, and copies of the first
// rows planted at the end (each copy in another range than its original).
func splitReadBacklog(t *testing.T) (*bundle, int64) {
	t.Helper()
	ctx := context.Background()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 30, Seed: 21, PromoteRatio: 0.8, RetractRatio: 0.3})
	b.tamper(t, b.tenants[0], "silver.claims", "materialize", `jsonb_set(payload, '{state}', '"forged"')`)
	b.tamper(t, b.tenants[1], "bronze.events", "append", `jsonb_set(payload, '{event_type}', '"claim.forged"')`)
	_, err := b.pool.Exec(ctx, `DROP INDEX oml.outbox_implied_once`)
	require.NoError(t, err)
	var first []int64
	rows, err := b.pool.Query(ctx, `SELECT seq FROM oml.outbox ORDER BY seq LIMIT 3`)
	require.NoError(t, err)
	first, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	for _, s := range first {
		b.plantCopy(t, s)
	}
	return b, b.lastSeq(t)
}

func poisonCount(vs []lakewriter.ReadVerdict) int {
	n := 0
	for _, v := range vs {
		if v.Poison != "" {
			n++
		}
	}
	return n
}

// TestBatchReadSplit_ForgeriesAndCopiesInOtherRanges_SameRowsAndVerdictsAsOneRead:
// a batch read in parts, by one to four readers in one exported snapshot,
// returns the rows of one read, in seq order, with the same verdicts — a
// copy whose original is in another range is still a copy.
func TestBatchReadSplit_ForgeriesAndCopiesInOtherRanges_SameRowsAndVerdictsAsOneRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, last := splitReadBacklog(t)
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	whole, err := lakewriter.ReadWhole(ctx, tx, 0, last)
	require.NoError(t, err)
	require.GreaterOrEqual(t, poisonCount(whole), 5, "two forgeries and three copies")
	for _, c := range []struct{ parts, helpers int }{{2, 1}, {3, 1}, {7, 2}, {13, 3}} {
		split, err := lakewriter.ReadSplit(ctx, b.pool, tx, 0, last, c.parts, c.helpers, false)
		require.NoError(t, err)
		require.Equal(t, whole, split, "%d parts, %d helpers", c.parts, c.helpers)
	}
}

// TestBatchReadSplit_RowDeadLetteredAfterTheSnapshot_AReaderInTheExportedSnapshotStillReadsIt:
// a helper reads in the snapshot of the read ahead it helps (the one the
// continuity fence compares), not in the database's state at its own
// start: a row dead-lettered after the snapshot is still read, as the
// snapshot's own transaction reads it.
func TestBatchReadSplit_RowDeadLetteredAfterTheSnapshot_AReaderInTheExportedSnapshotStillReadsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 22, PromoteRatio: 1})
	last := b.lastSeq(t)
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	whole, err := lakewriter.ReadWhole(ctx, tx, 0, last)
	require.NoError(t, err)

	gone := whole[len(whole)/2].Seq
	_, err = b.pool.Exec(ctx, `
INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, version, payload,
                             attempts, first_failed_at, last_failed_at, error, skipped_seq)
SELECT seq, tenant_id, journal_seq, target, op, artifact_id, version, payload, 1, now(), now(), 'a test', 0
FROM oml.outbox WHERE seq = $1`, gone)
	require.NoError(t, err)
	now, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = now.Rollback(ctx) }()
	fresh, err := lakewriter.ReadWhole(ctx, now, 0, last)
	require.NoError(t, err)
	require.Len(t, fresh, len(whole)-1, "a read started now leaves the dead-lettered row out")

	helped, err := lakewriter.ReadInExportedSnapshot(ctx, b.pool, tx, 0, last)
	require.NoError(t, err)
	require.Equal(t, whole, helped, "the helper reads in the exported snapshot")
}

// TestBatchReadSplit_NoHelperGetsAConnection_TheFirstReaderReadsEveryRange:
// helpers are never needed: when none gets a connection (a small or busy
// pool), the first reader reads every range and the read ends.
func TestBatchReadSplit_NoHelperGetsAConnection_TheFirstReaderReadsEveryRange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, last := splitReadBacklog(t)
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	whole, err := lakewriter.ReadWhole(ctx, tx, 0, last)
	require.NoError(t, err)
	split, err := lakewriter.ReadSplit(ctx, b.pool, tx, 0, last, 5, 3, true)
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the read must end without waiting for its helpers")
	require.Equal(t, whole, split)
}

// TestSplitRange_CoversTheBatchInOrder_NoRangeBelowTheSpan: the ranges
// of a split read tile (from, to] in order, none empty, at most n, and
// each at least span seqs unless the batch is one range.
func TestSplitRange_CoversTheBatchInOrder_NoRangeBelowTheSpan(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		from := rng.Int64N(1 << 40)
		to := from + 1 + rng.Int64N(100000)
		n := 1 + rng.IntN(16)
		span := 1 + rng.Int64N(5000)
		rs := lakewriter.SplitRanges(from, to, n, span)
		require.NotEmpty(t, rs)
		require.LessOrEqual(t, len(rs), n)
		require.Equal(t, from, rs[0][0])
		require.Equal(t, to, rs[len(rs)-1][1])
		for i, r := range rs {
			require.Less(t, r[0], r[1], "range %d of %v", i, rs)
			if i > 0 {
				require.Equal(t, rs[i-1][1], r[0])
			}
			if len(rs) > 1 {
				require.GreaterOrEqual(t, r[1]-r[0], span, "range %d of %v (span %d)", i, rs, span)
			}
		}
	}
}

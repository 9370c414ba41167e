package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

// waitFinal polls the horizon until f is final or wait passes (unrelated
// short transactions, e.g. autovacuum's ANALYZE, can hold it for a moment).
func waitFinal(t *testing.T, ctx context.Context, pool *pgxpool.Pool, f outbox.Fence, wait time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		h, err := outbox.Horizon(ctx, pool)
		require.NoError(t, err)
		if f.Final(h) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func currentXid(t *testing.T, ctx context.Context, tx pgx.Tx) uint64 {
	t.Helper()
	var x uint64
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&x))
	return x
}

// A transaction starts in the window between the fence's two statements,
// takes its xid and draws a seq there, and stays open. Whichever side of
// the fence its seq falls on, a fence that is final while it is open must
// not cover its seq: a cursor would pass the seq and lose the row when it
// commits. With the statements in the documented order (sequence read, then
// xid) the transaction's seq is above LastSeq and its xid below Xid; with
// them swapped its seq is covered by a fence whose Xid it does not hold
// back.
func TestTakeFence_TransactionBetweenItsStatementsIsNotCut(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	before := insert(t, ctx, pool) // something committed below the fence

	var (
		tx    pgx.Tx
		txXid uint64
		txSeq int64
	)
	restore := outbox.SetBetweenFenceStatements(func() {
		var err error
		tx, err = pool.Begin(ctx)
		require.NoError(t, err)
		txXid = currentXid(t, ctx, tx)
		txSeq = insert(t, ctx, tx)
	})
	f, err := outbox.TakeFence(ctx, pool)
	restore()
	require.NoError(t, err)
	require.NotNil(t, tx, "the seam ran")
	defer tx.Rollback(ctx)

	// What the lake writer would do now, with the transaction in flight.
	h, err := outbox.Horizon(ctx, pool)
	require.NoError(t, err)
	if f.Final(h) {
		require.Greaterf(t, txSeq, f.LastSeq,
			"fence %+v is final (horizon %d) while seq %d (xid %d) is in flight below it: that row would be lost", f, h, txSeq, txXid)
	}
	// The rule itself, independent of what else holds the horizon: every
	// transaction that drew a seq ≤ LastSeq has an xid below Xid.
	if txSeq <= f.LastSeq {
		require.Lessf(t, txXid, f.Xid,
			"seq %d ≤ fence seq %d was drawn by xid %d, which is not below the fence xid %d: the horizon can pass the fence with it in flight",
			txSeq, f.LastSeq, txXid, f.Xid)
	}

	require.NoError(t, tx.Commit(ctx))
	require.True(t, waitFinal(t, ctx, pool, f, 10*time.Second))
	got := seqs(t, ctx, pool, before-1, f.LastSeq)
	require.Contains(t, got, before)
	require.Equal(t, f.LastSeq, got[len(got)-1], "every seq up to the fence is readable once it is final")
}

// Two transactions are in flight across a fence, and the older one (the
// smaller xid and seq) commits first. The younger one still holds the
// prefix: the fence stays not final, and the one it names as blocker is the
// younger one; only when it commits is the prefix final, with both rows.
func TestStablePrefix_TwoInFlightOlderFinishesFirst(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)

	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer older.Rollback(ctx)
	olderXid := currentXid(t, ctx, older)
	a := insert(t, ctx, older)

	younger, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer younger.Rollback(ctx)
	youngerXid := currentXid(t, ctx, younger)
	b := insert(t, ctx, younger)
	c := insert(t, ctx, pool) // committed after both
	require.Less(t, a, b)
	require.Less(t, b, c)

	f, err := outbox.TakeFence(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, c, f.LastSeq)
	h, err := outbox.Horizon(ctx, pool)
	require.NoError(t, err)
	require.False(t, f.Final(h), "two transactions below the fence are in flight")

	require.NoError(t, older.Commit(ctx))
	// The older one is done: its row and the committed one after the
	// younger's are visible, the younger's is not. A fence that counted
	// the older transaction as the only one to wait for would now be
	// final and a cursor would pass seq b.
	require.Equal(t, []int64{a, c}, seqs(t, ctx, pool, a-1, f.LastSeq))
	h, err = outbox.Horizon(ctx, pool)
	require.NoError(t, err)
	require.LessOrEqual(t, h, youngerXid, "the younger transaction holds the horizon")
	require.False(t, f.Final(h), "seq %d is still in flight", b)
	bl, err := outbox.Blockers(ctx, pool, f.Xid, 50)
	require.NoError(t, err)
	var xids []uint64
	for _, x := range bl {
		xids = append(xids, x.Xid)
	}
	require.Contains(t, xids, youngerXid)
	require.NotContains(t, xids, olderXid, "a committed transaction is no blocker")

	require.NoError(t, younger.Commit(ctx))
	require.True(t, waitFinal(t, ctx, pool, f, 10*time.Second))
	require.Equal(t, []int64{a, b, c}, seqs(t, ctx, pool, a-1, f.LastSeq))
}

package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// These tests hold transactions open on purpose, which holds the horizon
// back for the whole cluster, so they do not run in parallel.
func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(migrateWithEvent)) }

// migrateWithEvent migrates and plants the one journal event the test rows
// name (an outbox row must name a journal event: the
// outbox_names_journal_event trigger): seq 1 of the provider chain, which
// needs no tenant row. Its hash and signature are filler; these tests are
// about the outbox's stable prefix, not the chain.
func migrateWithEvent(ctx context.Context, conn *pgx.Conn) error {
	if err := schema.Migrate(ctx, conn); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
VALUES ('00000000-0000-0000-0000-000000000000', 1, decode(repeat('00', 32), 'hex'), sha256('x'),
        decode(repeat('00', 64), 'hex'), 'filler', 'key.issued', '{}', now())`)
	return err
}

// Each row names a fresh artifact: the outbox holds one row per implied
// identity (outbox_implied_once), and these rows all cite the one event.
const insertRow = `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id)
VALUES ('00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', gen_random_uuid()::text) RETURNING seq`

func insert(t *testing.T, ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int64 {
	t.Helper()
	var seq int64
	require.NoError(t, q.QueryRow(ctx, insertRow).Scan(&seq))
	return seq
}

// stablePrefix is what the lake writer does: take a fence and, once the
// horizon passes it, read everything up to it. wait bounds how long to wait
// for the horizon (unrelated short transactions, e.g. autovacuum's ANALYZE,
// can hold it for a moment).
func stablePrefix(t *testing.T, ctx context.Context, pool *pgxpool.Pool, wait time.Duration) (outbox.Fence, bool) {
	t.Helper()
	f, err := outbox.TakeFence(ctx, pool)
	require.NoError(t, err)
	deadline := time.Now().Add(wait)
	for {
		h, err := outbox.Horizon(ctx, pool)
		require.NoError(t, err)
		if f.Final(h) {
			return f, true
		}
		if time.Now().After(deadline) {
			return f, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func seqs(t *testing.T, ctx context.Context, pool *pgxpool.Pool, from, to int64) []int64 {
	t.Helper()
	var out []int64
	require.NoError(t, outbox.ReadBatch(ctx, pool, from, to, nil, func(r *outbox.BatchRow) error {
		out = append(out, r.Seq)
		return nil
	}))
	return out
}

// (a) A transaction that inserted seq 1 stays open while 2..N commit:
// nothing is final until it commits; then all of it is.
func TestStablePrefix_OpenTransactionHoldsEverythingAfterIt(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)

	a, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer a.Rollback(ctx)
	first := insert(t, ctx, a)
	for i := 0; i < 5; i++ {
		insert(t, ctx, pool)
	}

	f, final := stablePrefix(t, ctx, pool, 300*time.Millisecond)
	require.False(t, final, "fence %+v must not be final while seq %d is in flight", f, first)
	require.Equal(t, first+5, f.LastSeq)
	// What a naive seq cursor would have read: the rows after the hole.
	require.Equal(t, []int64{first + 1, first + 2, first + 3, first + 4, first + 5}, seqs(t, ctx, pool, first-1, f.LastSeq))

	bl, err := outbox.Blockers(ctx, pool, f.Xid, 5)
	require.NoError(t, err)
	require.NotEmpty(t, bl, "the open transaction must be named as the blocker")
	require.Equal(t, "backend", bl[0].Kind)

	require.NoError(t, a.Commit(ctx))
	_, final = stablePrefix(t, ctx, pool, 10*time.Second)
	require.True(t, final)
	require.Equal(t, []int64{first, first + 1, first + 2, first + 3, first + 4, first + 5}, seqs(t, ctx, pool, first-1, f.LastSeq))
}

// (b) A transaction that took its xid first but drew seq 8 commits while the
// transaction holding seq 7 is still open: 7 is not lost.
func TestStablePrefix_EarlyXidLaterSeqDoesNotOvertakeOpenSeq(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)

	c, err := pool.Begin(ctx) // takes its xid first
	require.NoError(t, err)
	defer c.Rollback(ctx)
	var cx uint64
	require.NoError(t, c.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&cx))

	d, err := pool.Begin(ctx) // draws the smaller seq, stays open
	require.NoError(t, err)
	defer d.Rollback(ctx)
	seven := insert(t, ctx, d)

	eight := insert(t, ctx, c) // the larger seq, from the older xid
	require.Greater(t, eight, seven)
	require.NoError(t, c.Commit(ctx))

	// The trap: C's xid is now below the horizon and seq 8 is visible, while
	// seq 7 is still in flight.
	h, err := outbox.Horizon(ctx, pool)
	require.NoError(t, err)
	require.Greater(t, h, cx, "C's xid is below the horizon")
	require.Equal(t, []int64{eight}, seqs(t, ctx, pool, seven-1, eight))

	f, final := stablePrefix(t, ctx, pool, 300*time.Millisecond)
	require.Equal(t, eight, f.LastSeq)
	require.False(t, final, "seq %d is in flight: the prefix through %d is not final", seven, eight)

	require.NoError(t, d.Commit(ctx))
	_, final = stablePrefix(t, ctx, pool, 10*time.Second)
	require.True(t, final)
	require.Equal(t, []int64{seven, eight}, seqs(t, ctx, pool, seven-1, f.LastSeq))
}

// (c) An idle-in-transaction session in ANOTHER database of the cluster
// holds the horizon: reported as a blocker, nothing is lost.
func TestStablePrefix_IdleTransactionInAnotherDatabaseIsLagNotLoss(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t)
	pool := db.Pool(t)
	other := testdb.OpenPool(t, testdb.Cluster(t).URL("postgres"))

	idle, err := other.Begin(ctx)
	require.NoError(t, err)
	defer idle.Rollback(ctx)
	var idleXid uint64
	require.NoError(t, idle.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&idleXid))

	s1 := insert(t, ctx, pool)
	s2 := insert(t, ctx, pool)
	f, final := stablePrefix(t, ctx, pool, 300*time.Millisecond)
	require.False(t, final)

	bl, err := outbox.Blockers(ctx, pool, f.Xid, 5)
	require.NoError(t, err)
	require.NotEmpty(t, bl)
	require.Equal(t, "postgres", bl[0].Database)
	require.Equal(t, idleXid, bl[0].Xid)
	require.Equal(t, "idle in transaction", bl[0].State)

	require.NoError(t, idle.Rollback(ctx))
	_, final = stablePrefix(t, ctx, pool, 10*time.Second)
	require.True(t, final)
	require.Equal(t, []int64{s1, s2}, seqs(t, ctx, pool, s1-1, f.LastSeq))
}

// A rolled-back transaction's seq is a permanent gap and stalls nothing.
func TestStablePrefix_RolledBackSeqIsAGapNotAStall(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)

	s1 := insert(t, ctx, pool)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	gap := insert(t, ctx, tx)
	require.NoError(t, tx.Rollback(ctx))
	s3 := insert(t, ctx, pool)

	f, final := stablePrefix(t, ctx, pool, 10*time.Second)
	require.True(t, final)
	require.Equal(t, s3, f.LastSeq)
	require.Equal(t, []int64{s1, s3}, seqs(t, ctx, pool, 0, f.LastSeq))
	require.Equal(t, s1+1, gap)

	// The cut consumes the gap: with no limit, the batch ends at the fence.
	end, n, err := outbox.Cut(ctx, pool, 0, f.LastSeq, outbox.Limits{})
	require.NoError(t, err)
	require.Equal(t, s3, end)
	require.Equal(t, 2, n)
}

func TestCut_LimitsChooseTheEndInsideThePrefix(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	var all []int64
	for i := 0; i < 10; i++ {
		all = append(all, insert(t, ctx, pool))
	}
	first, last := all[0], all[9]

	end, n, err := outbox.Cut(ctx, pool, first-1, last, outbox.Limits{Rows: 4})
	require.NoError(t, err)
	require.Equal(t, all[3], end)
	require.Equal(t, 4, n)

	// Exactly the limit left: the batch ends at the stable end.
	end, n, err = outbox.Cut(ctx, pool, all[5], last, outbox.Limits{Rows: 4})
	require.NoError(t, err)
	require.Equal(t, last, end)
	require.Equal(t, 4, n)

	// A byte limit smaller than one row still makes progress (one row).
	end, n, err = outbox.Cut(ctx, pool, first-1, last, outbox.Limits{Bytes: 1})
	require.NoError(t, err)
	require.Equal(t, first, end)
	require.Equal(t, 1, n)

	// Nothing stable beyond the frontier: an empty batch.
	end, n, err = outbox.Cut(ctx, pool, last, last, outbox.Limits{Rows: 4})
	require.NoError(t, err)
	require.Equal(t, last, end)
	require.Zero(t, n)
}

func TestTakeFence_EmptyOutbox(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	f, err := outbox.TakeFence(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, f.LastSeq)
	require.NotZero(t, f.Xid)
}

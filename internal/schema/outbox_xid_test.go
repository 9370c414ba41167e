package schema_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testdb"
)

// The outbox xid rule: a transaction owns its xid before any of its outbox
// rows draws a seq. The scenario that breaks it without the statement
// trigger, made deterministic with an advisory lock:
//
//	T1 (fresh transaction, no prior write) inserts one outbox row whose
//	   payload expression blocks on an advisory lock the test holds. The
//	   identity default (seq) is evaluated before the payload column, so T1
//	   has drawn its seq S1 and is parked before the row reaches the heap.
//	T2 inserts and commits an outbox row: seq S2 > S1, xid X2.
//	The test releases the lock; T1 finishes and commits with xid X1.
//
// The rule holds iff X1 < X2 (smaller seq, older xid). Without
// outbox_take_xid, T1 would get its xid only when its row is written, after
// T2's: X1 > X2, and a lake writer cutting at "xid < xmin" could pass S2
// while S1 was still in flight.
func TestOutboxXidRule_XidIsTakenBeforeSeqIsDrawn(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pool := db.Pool(t)
	x1, x2, s1, s2 := raceOutboxInserts(t, pool)
	require.Less(t, s1, s2)
	require.Less(t, x1, x2, "the row with the smaller seq must have the older xid")
}

// The same scenario with the statement trigger dropped shows the test can
// fail: it is the trigger, not luck, that orders xid before seq.
func TestOutboxXidRule_WithoutTheTriggerTheRuleBreaks(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pool := db.Pool(t)
	_, err := pool.Exec(context.Background(), "DROP TRIGGER outbox_take_xid ON oml.outbox")
	require.NoError(t, err)
	// nextval() also assigns an xid when it happens to WAL-log the sequence
	// (first value after a checkpoint, which concurrent CREATE DATABASEs of
	// other tests can cause), so one run may come out right by accident;
	// the violation must show up in a few tries.
	for try := 0; try < 10; try++ {
		x1, x2, s1, s2 := raceOutboxInserts(t, pool)
		require.Less(t, s1, s2)
		if x1 > x2 {
			return // the smaller seq got the younger xid: the rule is broken
		}
	}
	t.Fatal("without outbox_take_xid the smaller seq never got the younger xid; the positive test may not be detecting anything")
}

func raceOutboxInserts(t *testing.T, pool *pgxpool.Pool) (x1, x2 uint64, s1, s2 int64) {
	t.Helper()
	ctx := context.Background()
	const lockKey = 424242

	plantProviderEvent(t, pool)

	// A subtlety that hides the bug from naive tests: nextval() assigns the
	// transaction an xid whenever it WAL-logs the sequence, which it does on
	// the first call and then once every 32 values (or first after a
	// checkpoint). Draw one value first so T1's nextval is one that does not
	// log, as most are.
	// (Each row names another artifact, fresh on every call: the outbox
	// holds one row per implied identity, outbox_implied_once.)
	tag := fmt.Sprintf("race-%d-", time.Now().UnixNano())
	_, err := pool.Exec(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id)
	                          VALUES ('00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', $1)`, tag+"warm-up")
	require.NoError(t, err)
	var logCnt int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT log_cnt FROM oml.outbox_seq_seq").Scan(&logCnt))
	require.Greater(t, logCnt, int64(1), "the next nextval should not WAL-log")

	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey)
	require.NoError(t, err)

	c1, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c1.Release()
	var pid1 int
	require.NoError(t, c1.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1))

	type res struct {
		seq int64
		xid uint64
		err error
	}
	done := make(chan res, 1)
	go func() {
		var r res
		r.err = pgx.BeginFunc(ctx, c1, func(tx pgx.Tx) error {
			// Column order: seq (identity) is evaluated before payload.
			return tx.QueryRow(ctx, `
				INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, payload)
				VALUES ('00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', $2,
				        jsonb_build_object('wait', pg_advisory_xact_lock_shared($1)::text))
				RETURNING seq, xid::text::bigint`, lockKey, tag+"t1").Scan(&r.seq, &r.xid)
		})
		done <- r
	}()

	// Wait (a signal, not a sleep) until T1 is parked on the lock.
	require.Eventually(t, func() bool {
		var waiting bool
		_ = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)`, pid1).Scan(&waiting)
		return waiting
	}, testTimeout, pollEvery)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id)
			VALUES ('00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', $1)
			RETURNING seq, xid::text::bigint`, tag+"t2").Scan(&s2, &x2)
	}))
	_, err = holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey)
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)
	return r.xid, x2, r.seq, s2
}

// plantProviderEvent gives the outbox rows of these tests a journal event
// to name (the outbox_journal_event foreign key): seq 1 of the provider
// chain, the one event a database without tenants can hold. Its hash and
// signature are filler; these tests are about the outbox's xid, not the
// chain.
func plantProviderEvent(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
		VALUES ('00000000-0000-0000-0000-000000000000', 1, decode(repeat('00', 32), 'hex'), sha256('x'),
		        decode(repeat('00', 64), 'hex'), 'filler', 'key.issued', '{}', now())
		ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
}

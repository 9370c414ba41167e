package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/omlhq/oml/internal/replication"
)

// Querier is what the read functions need: a pool, a connection or a tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Beginner starts transactions (a pool or a connection).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Fence is a candidate end of the stable prefix: LastSeq becomes final once
// the snapshot horizon passes Xid.
type Fence struct {
	LastSeq int64  // the outbox sequence's last value when the fence was taken (0: none drawn yet)
	Xid     uint64 // a transaction id assigned after LastSeq was read
}

// Final reports whether every outbox row with seq ≤ f.LastSeq has committed
// or can never commit, given the current snapshot horizon (xmin).
func (f Fence) Final(horizon uint64) bool { return horizon > f.Xid }

// betweenFenceStatements, when set, runs between TakeFence's two
// statements (after the sequence is read, before the xid is taken). It is a
// test seam only: the fence tests use it to start a transaction exactly in
// that window, which is where swapping the two statements would lose a row.
// It is nil in every non-test build.
var betweenFenceStatements func()

// TakeFence reads the outbox sequence's last value and then takes a fresh
// transaction id, in that order, in a transaction of its own.
//
// The order matters: a transaction that drew a seq ≤ LastSeq owned its xid
// before drawing it, hence before this read, hence before Xid was assigned.
func TakeFence(ctx context.Context, db Beginner) (Fence, error) {
	var f Fence
	tx, err := db.Begin(ctx)
	if err != nil {
		return f, fmt.Errorf("outbox fence: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The fence's own commit protects no data (it only spends an xid), so it
	// must not wait for synchronous standbys: during a synchronous-standby
	// outage the writer, `oml lake status` and `oml doctor` then report the
	// lag and the missing standby instead of hanging on their own commit.
	// (off stays off: local would add a flush.)
	if _, err := tx.Exec(ctx, `SELECT set_config('synchronous_commit',
       CASE WHEN current_setting('synchronous_commit') = 'off' THEN 'off' ELSE 'local' END, true)`); err != nil {
		return f, fmt.Errorf("outbox fence: %w", err)
	}
	// pg_sequence_last_value is NULL until the first nextval.
	var last pgtype.Int8
	if err := tx.QueryRow(ctx,
		`SELECT pg_sequence_last_value(pg_get_serial_sequence('oml.outbox', 'seq')::regclass)`).Scan(&last); err != nil {
		return f, fmt.Errorf("outbox fence: read the outbox sequence: %w", err)
	}
	if betweenFenceStatements != nil {
		betweenFenceStatements()
	}
	// A separate statement, so the xid is assigned strictly after the read.
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&f.Xid); err != nil {
		return f, fmt.Errorf("outbox fence: take a transaction id: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return f, fmt.Errorf("outbox fence: %w", err)
	}
	if last.Valid {
		f.LastSeq = last.Int64
	}
	return f, nil
}

// Horizon returns the current snapshot horizon: the oldest transaction id
// still running anywhere in the cluster (or the next xid if none is).
func Horizon(ctx context.Context, q Querier) (uint64, error) {
	var h uint64
	if err := q.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&h); err != nil {
		return 0, fmt.Errorf("outbox: read the snapshot horizon: %w", err)
	}
	return h, nil
}

// CoverLSN returns a WAL position at or past the commit record of every
// transaction that has ended before the call (see "Not ahead of a failover"
// in the package doc). Call it only after Final(horizon) was seen true for a
// fence, in a later statement: then every transaction that could hold a row
// of the fence's prefix has left the process array, and a transaction
// inserts its commit record before it leaves, so the current WAL insert
// position covers all of them.
//
// The insert position, not pg_current_wal_lsn() (the write position): with
// synchronous_commit = off a committed transaction's commit record can sit
// in the WAL buffers, unwritten, for up to three wal_writer_delay rounds,
// below the insert position and above the write position. The standby can
// only flush what the primary has flushed, so waiting for it to reach the
// insert position also waits out the primary's own WAL writer.
func CoverLSN(ctx context.Context, q Querier) (replication.LSN, error) {
	var insert, block, seg int64
	if err := q.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint,
       current_setting('wal_block_size')::bigint, pg_size_bytes(current_setting('wal_segment_size'))`).Scan(&insert, &block, &seg); err != nil {
		return 0, fmt.Errorf("outbox fence: read the WAL insert position: %w", err)
	}
	return replication.InsertCover(replication.LSN(insert), uint64(block), uint64(seg)), nil
}

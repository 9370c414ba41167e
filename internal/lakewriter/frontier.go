package lakewriter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/outbox"
)

// readFrontier reads the frontier cache (outbox.ReadFrontier is its one
// read; the writes are below, the lake writer's own). A deleted row reads
// as 0 with missing set: the cache is derived from the lake (the start
// resumes from the tables' txn versions whatever it says) and
// writeFrontier recreates it.
func readFrontier(ctx context.Context, db *pgxpool.Pool) (seq int64, missing bool, err error) {
	f, err := outbox.ReadFrontier(ctx, db)
	if errors.Is(err, outbox.ErrFrontierMissing) {
		return 0, true, nil
	}
	return f.Seq, false, err
}

// writeFrontier advances the frontier cache to end after a batch (start,
// end] is in every table it touched. The cache never moves backwards, and
// never past the database's own outbox sequence (a lake ahead of the
// database must not drag the cache with it); it records the database's
// system identifier and timeline, and fenceXid as horizon_xid: the xid of
// the newest fence the snapshot horizon had passed (every outbox row at or
// below its seq was final when the batch was cut; 0 keeps the recorded
// one). It is for status and lag metrics; the Delta logs are the recovery
// authority. A missing row (deleted by hand) is recreated.
func writeFrontier(ctx context.Context, db *pgxpool.Pool, start, end int64, fenceXid uint64) error {
	_, err := db.Exec(ctx, `
WITH i AS (`+outbox.IdentitySQL+`)
INSERT INTO oml.lake_frontier AS f (id, frontier, batch_start, batch_end, horizon_xid, system_identifier, timeline, updated_at)
SELECT true, greatest(LEAST($2, i.last_seq), 0), $1, $2, CASE WHEN $3::bigint > 0 THEN $3::bigint::text::xid8 END,
       i.system_identifier, i.tli::text, now()
FROM i
ON CONFLICT (id) DO UPDATE
SET frontier = GREATEST(f.frontier, EXCLUDED.frontier), batch_start = EXCLUDED.batch_start, batch_end = EXCLUDED.batch_end,
    horizon_xid = coalesce(EXCLUDED.horizon_xid, f.horizon_xid),
    system_identifier = EXCLUDED.system_identifier, timeline = EXCLUDED.timeline,
    updated_at = EXCLUDED.updated_at`, start, end, int64(fenceXid))
	if err != nil {
		return fmt.Errorf("advance the frontier cache to %d: %w", end, err)
	}
	return nil
}

// RewindFrontier lowers the frontier cache to at most to: after `oml lake
// repair` rewound tables to the last seq the lake shares with the
// database, the cache must not claim more than the tables hold (reconcile
// compares at it). It is the one write that moves the cache backwards;
// the lake writer's own writes only ever raise it (writeFrontier).
func RewindFrontier(ctx context.Context, db *pgxpool.Pool, to int64) error {
	if _, err := db.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = LEAST(frontier, $1), updated_at = now()`, max(to, 0)); err != nil {
		return fmt.Errorf("lower the frontier cache to %d: %w", to, err)
	}
	return nil
}

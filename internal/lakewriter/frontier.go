package lakewriter

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/outbox"
)

// readFrontier reads the frontier cache (outbox.ReadFrontier is its one
// read; the writes are below, the lake writer's own).
func readFrontier(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	f, err := outbox.ReadFrontier(ctx, db)
	return f.Seq, err
}

// writeFrontier advances the frontier cache to end after a batch (start,
// end] is in every table it touched. The cache never moves backwards, and
// never past the database's own outbox sequence (a lake ahead of the
// database must not drag the cache with it); it records the database's
// system identifier and timeline, and fenceXid as horizon_xid: the xid of
// the newest fence the snapshot horizon had passed (every outbox row at or
// below its seq was final when the batch was cut; 0 keeps the recorded
// one). It is for status and lag metrics; the Delta logs are the recovery
// authority.
func writeFrontier(ctx context.Context, db *pgxpool.Pool, start, end int64, fenceXid uint64) error {
	_, err := db.Exec(ctx, `
WITH i AS (`+identitySQL+`)
UPDATE oml.lake_frontier
SET frontier = GREATEST(frontier, LEAST($2, i.last_seq)), batch_start = $1, batch_end = $2,
    horizon_xid = CASE WHEN $3::bigint > 0 THEN $3::bigint::text::xid8 ELSE horizon_xid END,
    system_identifier = i.system_identifier, timeline = i.tli::text,
    updated_at = now()
FROM i`, start, end, int64(fenceXid))
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

package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrFrontierMissing: oml.lake_frontier has no row (someone deleted it).
// The cache is derived from the lake, so the lake writer recreates it on
// its next start; every other reader stops with this error rather than
// act on a frontier of 0 (prune would otherwise keep everything, status
// would report the whole outbox as lag).
var ErrFrontierMissing = errors.New("the frontier cache oml.lake_frontier has no row (it was deleted); the lake writer recreates it from the lake on its next start: run `oml lake drain --once`")

// FrontierRow is the frontier cache, oml.lake_frontier: how far the lake
// writer has drained the outbox (every row at or below Seq is in every
// table it touches), the last batch's bounds, and the database's clock at
// the read (for retention cut-offs measured the way the rows' created_at
// was).
type FrontierRow struct {
	Seq        int64
	BatchStart int64      // 0 before the first batch
	BatchEnd   int64      // 0 before the first batch
	UpdatedAt  *time.Time // nil before the first batch
	Now        time.Time
}

// ReadFrontier reads the frontier cache: the one read of oml.lake_frontier
// (the lake writer is its only writer, in internal/lakewriter).
func ReadFrontier(ctx context.Context, q Querier) (FrontierRow, error) {
	var f FrontierRow
	err := q.QueryRow(ctx, `SELECT frontier, coalesce(batch_start, 0), coalesce(batch_end, 0), updated_at, now() FROM oml.lake_frontier`).
		Scan(&f.Seq, &f.BatchStart, &f.BatchEnd, &f.UpdatedAt, &f.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return FrontierRow{}, ErrFrontierMissing
	}
	if err != nil {
		return FrontierRow{}, fmt.Errorf("read the frontier cache (oml.lake_frontier): %w", err)
	}
	return f, nil
}

package doctor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
)

// LakeView is what `oml status` shows of the lake: the fork check's
// verdict and the continuity check, as chainverify.ForkCheck and
// lakewriter.CheckLake report them.
type LakeView struct {
	Fork       *chainverify.ForkCheckResult
	Continuity lakewriter.Continuity
}

// ReadLakeView reads the lake for `oml status` the way doctor reads it:
// every table's log once, through the lake summary doctor stores (a table
// whose log is unchanged since a full read is served by it, less the
// scrub's share), for both the continuity positions and bronze's heads.
// ForkCheck and CheckLake each read every table themselves (31–41 s at
// 28,000 tables, against doctor's 2 s). Like them it writes nothing: the
// summary is read, never stored. The witnesses are read and verified in
// full, against the provider chain verified in full (ForkCheck's rule).
func ReadLakeView(ctx context.Context, pool *pgxpool.Pool, lake store.Store) (LakeView, error) {
	r := &run{pool: pool, lake: lake, dbUsable: true, th: DefaultThresholds(), now: time.Now, readOnly: true,
		opts: Options{Timeout: 24 * time.Hour}} // ctx bounds it: status has no per-check timeout
	fc, err := chainverify.ForkCheckWith(ctx, pool, lake, nil, r.lazyHeadReader())
	if err != nil {
		return LakeView{}, err
	}
	pos, err := r.positions(ctx)
	if err != nil {
		return LakeView{}, err
	}
	c, err := lakewriter.CheckContinuity(ctx, pool, lake, pos)
	if err != nil {
		return LakeView{}, err
	}
	return LakeView{Fork: fc, Continuity: c}, nil
}

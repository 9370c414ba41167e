package lakewriter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// LakeMissingError says the lake holds none of what the database says was
// drained into it: the frontier is past zero, yet the provider's bronze
// table (which the very first batch always writes: outbox seq 1 is the
// deployment's root key.issued) has no Delta log. Either --lake names the
// wrong lake, or the lake was lost.
type LakeMissingError struct {
	Lake     string // the lake root, as store.String names it
	Frontier int64
}

func (e *LakeMissingError) Error() string {
	return fmt.Sprintf("the lake %s holds no oml tables, but the database says outbox rows up to seq %d were drained into it (frontier %d): check that --lake (or OML_LAKE_URL) names this deployment's lake; if it does, the lake was lost (see docs/runbooks/lake.md)",
		e.Lake, e.Frontier, e.Frontier)
}

// CheckLakeHoldsFrontier returns a *LakeMissingError when frontier > 0 and
// the lake has no provider bronze table; nil when the lake has it or
// nothing was drained yet. It only reads (one List under that table's
// _delta_log/), so read-only commands can call it on a lake that may not
// exist.
func CheckLakeHoldsFrontier(ctx context.Context, lake store.Store, frontier int64) error {
	if frontier <= 0 {
		return nil
	}
	key := tables.TableKey{Tenant: journal.ProviderTenant, Kind: tables.Bronze}.Path() + "/_delta_log/"
	objs, err := lake.List(ctx, key, "")
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("list %s under %s: %w", key, lake, err)
	}
	if len(objs) > 0 {
		return nil
	}
	return &LakeMissingError{Lake: lake.String(), Frontier: frontier}
}

// CheckDrainedLake is CheckLakeHoldsFrontier with the frontier read from
// the frontier cache, for commands that have not read the status already.
func CheckDrainedLake(ctx context.Context, db *pgxpool.Pool, lake store.Store) error {
	frontier, _, err := readFrontier(ctx, db)
	if err != nil {
		return err
	}
	return CheckLakeHoldsFrontier(ctx, lake, frontier)
}

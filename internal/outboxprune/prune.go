package outboxprune

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
)

// Options configure a run.
type Options struct {
	DB        *pgxpool.Pool
	Lake      store.Store
	OlderThan time.Duration // only rows created longer ago; 0: every applied row (the command defaults to outbox.DefaultRetention)
	BatchRows int
	DryRun    bool
	OnBatch   func(outbox.PruneBatch)
}

// LakeError means the lake's tables could not be read: prune refuses
// rather than guess what is applied (a configuration or connection
// problem, exit 2).
type LakeError struct{ Err error }

func (e *LakeError) Error() string {
	return fmt.Sprintf("cannot read the lake's tables, so nothing was pruned (never on a guess): %v; check --lake and the store", e.Err)
}
func (e *LakeError) Unwrap() error { return e.Err }

// RefusedError means the lake does not share the database's history (the
// continuity check): txn versions describe other rows, nothing is pruned.
type RefusedError struct{ C lakewriter.Continuity }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the lake is %s the database (%s), so its txn versions do not describe this database's outbox rows: nothing was pruned; see docs/runbooks/continuity.md",
		map[string]string{lakewriter.ContinuityAhead: "ahead of", lakewriter.ContinuityDiverged: "diverged from",
			lakewriter.ContinuityDeployment: "from another deployment than"}[e.C.State], e.C.Detail)
}

// Bounds reads every table's txn version and checks continuity: the input
// of outbox.Prune. Errors are *LakeError (unreadable lake) or
// *RefusedError (continuity), or a database error.
func Bounds(ctx context.Context, db *pgxpool.Pool, lake store.Store) ([]outbox.TableBound, error) {
	return BoundsWith(ctx, db, lake, func(ctx context.Context) ([]lakewriter.TablePosition, error) {
		return lakewriter.LakePositions(ctx, db, lake)
	})
}

// BoundsWith is Bounds with the tables' positions read by positions
// (lakewriter.LakePositions' contract): oml doctor passes the positions
// of its one read of every table.
func BoundsWith(ctx context.Context, db *pgxpool.Pool, lake store.Store, positions func(context.Context) ([]lakewriter.TablePosition, error)) ([]outbox.TableBound, error) {
	if lake == nil {
		return nil, &LakeError{Err: fmt.Errorf("no lake configured (pass --lake or set OML_LAKE_URL)")}
	}
	pos, err := positions(ctx)
	if err != nil {
		return nil, &LakeError{Err: err}
	}
	c, err := lakewriter.CheckContinuity(ctx, db, lake, pos)
	if err != nil {
		return nil, &LakeError{Err: err}
	}
	return BoundsOf(pos, c)
}

// BoundsOf is Bounds of positions whose continuity c was already checked
// (lakewriter.CheckContinuity of exactly pos): oml doctor's continuity
// check has checked it, and checking it again cost the outbox check one
// statement per 5,000 tables. The error is *RefusedError when c is not OK.
func BoundsOf(pos []lakewriter.TablePosition, c lakewriter.Continuity) ([]outbox.TableBound, error) {
	if !c.OK() {
		return nil, &RefusedError{C: c}
	}
	return TableBounds(pos), nil
}

// TableBounds are the positions as outbox.Prune's table bounds, whether
// or not the lake shares the database's history: only for a read that is
// thrown away unless it does (oml doctor computes what is prunable beside
// its continuity comparison). Anything that deletes takes Bounds.
func TableBounds(pos []lakewriter.TablePosition) []outbox.TableBound {
	out := make([]outbox.TableBound, 0, len(pos))
	for _, p := range pos {
		out = append(out, outbox.TableBound{Tenant: p.Key.Tenant, Target: string(p.Key.Kind), TxnVersion: p.TxnVersion})
	}
	return out
}

// Run prunes (or, DryRun, counts) the outbox rows the lake has applied.
func Run(ctx context.Context, opts Options) (outbox.PruneResult, error) {
	bounds, err := Bounds(ctx, opts.DB, opts.Lake)
	if err != nil {
		return outbox.PruneResult{DryRun: opts.DryRun}, err
	}
	return outbox.Prune(ctx, opts.DB, opts.DB, outbox.PruneOptions{
		Tables: bounds, OlderThan: opts.OlderThan, BatchRows: opts.BatchRows, DryRun: opts.DryRun, OnBatch: opts.OnBatch,
	})
}

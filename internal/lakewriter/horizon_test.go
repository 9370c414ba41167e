package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestHorizon_OpenTransactionIsLagNotLoss: a transaction inserts an outbox
// row (drawing a seq) and stays open while later events commit. A drain pass
// applies nothing past the rows before it and names the blocker: lag, not
// loss. It then rolls back (a permanent gap): the next pass applies every
// committed row, exactly once. (It does not run in parallel: the open
// transaction holds the horizon of the whole cluster.)
func TestHorizon_OpenTransactionIsLagNotLoss(t *testing.T) {
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 5, Seed: 41})
	lake := store.NewMem()
	o := b.opts(lake)
	o.HorizonTimeout = 300 * time.Millisecond
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)
	before := d.Frontier()

	// Tenant 0 appends inside a transaction that stays open.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var held int64
	// (A gold row: the event's own bronze row is in the outbox already, and
	// the outbox refuses a second copy, outbox_implied_once. It is rolled
	// back before anything reads it.)
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload)
SELECT tenant_id, seq, 'gold.lineage', 'materialize', '{}' FROM oml.journal WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1
RETURNING seq`, b.tenants[0]).Scan(&held))
	// Meanwhile tenant 1 keeps committing.
	b.load(t, workload.Config{Tenants: b.tenants[1:], Claims: 5, Seed: 42})

	sum, err := d.DrainOnce(ctx)
	require.NoError(t, err)
	require.True(t, sum.HorizonHeld, "the open transaction holds the horizon")
	require.NotEmpty(t, sum.Blockers)
	require.Equal(t, before, d.Frontier(), "nothing past the open transaction's seq is applied")

	require.NoError(t, tx.Rollback(ctx)) // its seq becomes a permanent gap
	sum, err = d.DrainOnce(ctx)
	require.NoError(t, err)
	require.False(t, sum.HorizonHeld)
	require.Greater(t, d.Frontier(), held, "a rolled-back seq does not stall the writer")
	b.verifyLake(t, lake)
}

package lakewriter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestPoison_EachKindDeadLetteredAfterBudget plants one poison row of each
// kind (a body whose digest no longer matches the journal, a missing body, an
// undecodable retract payload). Each is retried up to the budget, then
// journalled as materialize.skipped and moved to oml.dead_letter; the
// frontier passes them, the rest of the lake is exact, and every chain still
// verifies.
func TestPoison_EachKindDeadLetteredAfterBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	res := b.load(t, workload.Config{Claims: 30, Seed: 11, Poison: 3, RetractRatio: 0.5})
	require.Len(t, res.Poison, 3)
	kinds := map[string]bool{}
	var planted []int64
	for _, p := range res.Poison {
		kinds[p.Kind] = true
		planted = append(planted, p.OutboxSeq)
	}
	require.Len(t, kinds, 3, "one poison row of each kind")

	lake := store.NewMem()
	o := b.opts(lake)
	o.PoisonBudget = 4
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Equal(t, sortedInt64(planted), sortedInt64(sum.DeadLettered))
	require.GreaterOrEqual(t, d.Frontier(), sortedInt64(planted)[2], "the frontier passes the dead letters")

	for _, p := range res.Poison {
		var attempts int
		var errText string
		var skipped int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT attempts, error, skipped_seq FROM oml.dead_letter WHERE outbox_seq = $1`, p.OutboxSeq).
			Scan(&attempts, &errText, &skipped))
		require.Equal(t, 4, attempts, "dead-lettered exactly when the budget is spent")
		require.NotEmpty(t, errText)
		var evType string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT event_type FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, p.Tenant, skipped).Scan(&evType))
		require.Equal(t, "materialize.skipped", evType)
	}
	b.verifyLake(t, lake)

	rep, err := chainverify.VerifyDB(ctx, b.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "every chain verifies, with the materialize.skipped events in it")
}

// TestPoison_BudgetSurvivesRestarts: the attempt count is in PostgreSQL, so
// a writer that is restarted after every attempt still dead-letters the row
// when the budget is spent, instead of retrying it for ever.
func TestPoison_BudgetSurvivesRestarts(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	res := b.load(t, workload.Config{Claims: 10, Seed: 12, Poison: 1})
	require.Len(t, res.Poison, 1)
	lake := store.NewMem()
	// Two writers, each stopped right after counting one attempt.
	for i := 0; i < 2; i++ {
		o := b.opts(lake)
		o.PoisonBudget = 3
		// A long backoff after the failed attempt, so the writer is surely
		// waiting (not attempting again) when it is stopped.
		o.BackoffMin, o.BackoffMax = time.Minute, time.Minute
		d, err := lakewriter.New(o)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		// Stop each writer as soon as it has counted one attempt.
		go func() {
			for ctx.Err() == nil {
				var n int
				_ = b.pool.QueryRow(ctx, `SELECT coalesce(max(attempts), 0) FROM oml.outbox_attempts`).Scan(&n)
				if n > i {
					cancel()
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		_, err = d.DrainOnce(ctx)
		cancel()
		if err != nil {
			require.True(t, errors.Is(err, context.Canceled), "got %v", err)
		}
	}
	// The third writer's first attempt spends the budget of 3.
	o := b.opts(lake)
	o.PoisonBudget = 3
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Equal(t, []int64{res.Poison[0].OutboxSeq}, sum.DeadLettered)
	var attempts int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT attempts FROM oml.dead_letter`).Scan(&attempts))
	require.Equal(t, 3, attempts, "restarts must not reset the budget")
	b.verifyLake(t, lake)
}

// TestOutage_StoreDownMidDrain_DeadLettersNothing: the object store fails
// every write for a while in the middle of a drain. That is an outage, not
// a poison row: the writer backs off and retries, dead-letters nothing, and
// completes when the store is back.
func TestOutage_StoreDownMidDrain_DeadLettersNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 30, Seed: 13})
	faulty := store.NewFaulty(store.NewMem(), store.Rule{
		Ops:   []store.OpKind{store.OpPut, store.OpPutIfAbsent},
		After: 6, Times: 40,
		Kind: store.FaultError,
		Err:  errors.New("503 Slow Down (injected outage)"),
	})
	o := b.opts(faulty)
	o.PoisonBudget = 1 // an outage counted as poison would dead-letter at once
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Empty(t, sum.DeadLettered)
	var attempts int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM oml.outbox_attempts`).Scan(&attempts))
	require.Zero(t, attempts, "an outage must not spend any row's retry budget")
	b.verifyLake(t, faulty)
}

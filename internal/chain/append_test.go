package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

func TestAppend_ConcurrentWritersManyTenantsLeaveEveryChainValid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const tenants, writers, perWriter = 6, 12, 25
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		ids[i] = b.tenant(t, name("t", i))
	}
	var artifacts atomic.Int64
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < perWriter; i++ {
				tn := ids[rng.IntN(tenants)]
				a := fmt.Sprintf("art-%d", artifacts.Add(1))
				var evs []journal.Event
				evs = append(evs, submit(t, a, 1, "alice", "human"))
				if rng.IntN(2) == 0 { // half the time, a batch: submit+promote (+demote)
					evs = append(evs, promote(a, 1, "bob"))
					if rng.IntN(2) == 0 {
						evs = append(evs, journal.MustNew(journal.ClaimDemoted{ArtifactID: a, Version: 1, By: "carol"}))
					}
				}
				if _, err := chain.Append(ctx, b.pool, b.key, tn, evs...); err != nil {
					return err
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	total := 0
	for _, tn := range ids {
		total += checkChain(t, ctx, b.pool, b.key, tn)
	}
	checkChain(t, ctx, b.pool, b.key, journal.ProviderTenant)
	require.GreaterOrEqual(t, total, tenants+writers*perWriter)
}

// The stale-head trap: a head read whose snapshot predates the lock wait.
// Many writers on ONE tenant maximise lock waits; any stale head would try
// to reuse a seq and the (tenant_id, seq) primary key would fail the append
// (ErrChainConflict), failing this test. Checked by hand: with the lock
// folded into the head query (FROM pg_advisory_xact_lock(...), chain_heads)
// this test fails within a second with a journal_pkey violation.
func TestAppend_OneTenantManyWritersNeverReadsAStaleHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "hot")
	const writers, perWriter = 8, 30
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for i := 0; i < perWriter; i++ {
				a := fmt.Sprintf("w%d-%d", w, i)
				if _, err := chain.Append(ctx, b.pool, b.key, tn, submit(t, a, 1, "alice", "human")); err != nil {
					return err
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, 1+writers*perWriter, checkChain(t, ctx, b.pool, b.key, tn))
}

func TestAppendTx_RefusesRepeatableRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "iso")
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		_, err := chain.AppendTx(ctx, tx, b.key, tn, submit(t, "a", 1, "w", "human"))
		return err
	})
	require.ErrorIs(t, err, chain.ErrIsolation)
}

func TestAppendTx_JoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "rollback")
	errBoom := errors.New("caller changed its mind")
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		recs, err := chain.AppendTx(ctx, tx, b.key, tn, submit(t, "a", 1, "w", "human"))
		require.NoError(t, err)
		require.Equal(t, uint64(2), recs[0].Seq)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 1, checkChain(t, ctx, b.pool, b.key, tn), "a rolled-back append leaves nothing")
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.claims WHERE tenant_id = $1`, tn).Scan(&n))
	require.Zero(t, n)
}

func TestAppend_UnknownTenantAndUnissuedKeyAreRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := chain.Append(ctx, b.pool, b.key, uuid.New(), submit(t, "a", 1, "w", "human"))
	require.ErrorIs(t, err, journal.ErrUnknownTenant)

	tn := b.tenant(t, "k")
	other := setup(t).key // issued in another deployment only
	_, err = chain.Append(ctx, b.pool, other, tn, submit(t, "a", 1, "w", "human"))
	require.ErrorIs(t, err, journal.ErrRejected)
	require.ErrorContains(t, err, "not issued")

	_, err = chain.Append(ctx, b.pool, b.key, tn)
	require.ErrorIs(t, err, chain.ErrNoEvents)
}

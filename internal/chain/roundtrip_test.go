package chain_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// rtCounter counts client round trips: each Exec/Query and each batch
// (one pipelined send and its results) is one.
type rtCounter struct{ queries, batches atomic.Int64 }

func (c *rtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *rtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *rtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}
func (c *rtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *rtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An append costs BEGIN, one pipelined round trip for lock and reads, one
// for all the writes, and COMMIT — four, whatever the number of events
// (plus, on a connection's first use of a statement, pgx's one pipelined
// prepare per batch).
func TestAppend_RoundTripsDoNotGrowWithTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "rt")
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	counter := &rtCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(ctx))

	for _, k := range []int{1, 10, 100} {
		evs := make([]journal.Event, 0, 2*k)
		for i := range k {
			a := fmt.Sprintf("k%d-%d", k, i)
			evs = append(evs, submit(t, a, 1, "alice", "human"), promote(a, 1, "bob"))
		}
		counter.queries.Store(0)
		counter.batches.Store(0)
		_, err := chain.Append(ctx, pool, b.key, tn, evs...)
		require.NoError(t, err)
		require.Equal(t, int64(2), counter.batches.Load(), "k=%d: pipelined batches", k)
		require.Equal(t, int64(2), counter.queries.Load(), "k=%d: BEGIN and COMMIT", k)
	}
}

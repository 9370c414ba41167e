package tenant_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

func TestInit_ConcurrentSameKeyCreatesOnceOtherKeyRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	k, _ := keys.Generate()
	var created atomic.Int32
	var g errgroup.Group
	for range 4 {
		g.Go(func() error {
			r, err := tenant.Init(ctx, pool, k)
			if r.Created {
				created.Add(1)
			}
			return err
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, int32(1), created.Load())
	h, ok, err := chain.ReadHead(ctx, pool, tenant.Provider)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(1), h.Seq)

	other, _ := keys.Generate()
	_, err = tenant.Init(ctx, pool, other)
	require.ErrorIs(t, err, tenant.ErrOtherKey)
}

// initialised is a fresh database whose provider chain was started
// (tenant.Init) under a new deployment key.
func initialised(t *testing.T) (*pgxpool.Pool, *keys.Key) {
	t.Helper()
	pool := testdb.New(t).Pool(t)
	k, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(context.Background(), pool, k)
	require.NoError(t, err)
	return pool, k
}

func TestCreate_ConcurrentSameNameCreatesOneTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, k := initialised(t)
	var created atomic.Int32
	ids := make(chan string, 6)
	var g errgroup.Group
	for range 6 {
		g.Go(func() error {
			tn, c, err := tenant.Create(ctx, pool, k, "acme")
			if c {
				created.Add(1)
			}
			ids <- tn.ID.String()
			return err
		})
	}
	require.NoError(t, g.Wait())
	close(ids)
	require.Equal(t, int32(1), created.Load())
	first := <-ids
	for id := range ids {
		require.Equal(t, first, id)
	}
	// Exactly one tenant.created on the provider chain, one genesis.
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE event_type = 'tenant.created'`).Scan(&n))
	require.Equal(t, 1, n)
	ts, err := tenant.List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, int64(1), ts[0].HeadSeq)
}

func TestResolve_ByNameOrIDAndUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, k := initialised(t)
	tn, _, err := tenant.Create(ctx, pool, k, "acme")
	require.NoError(t, err)
	got, err := tenant.Resolve(ctx, pool, tn.ID.String())
	require.NoError(t, err)
	require.Equal(t, "acme", got.Name)
	_, err = tenant.Resolve(ctx, pool, "nope")
	require.ErrorIs(t, err, tenant.ErrUnknown)
	require.ErrorContains(t, err, "oml tenant list")
	_, _, err = tenant.Create(ctx, pool, k, "_provider")
	require.ErrorIs(t, err, tenant.ErrBadName)
}

// KnownIDs is oml.tenants ∪ oml.chain_heads with the provider, in id
// order: a chain head without a tenants row (a chain restored ahead of
// it) is listed, and the provider is listed before Init too.
func TestKnownIDs_TenantsAndChainHeadsWithTheProviderInIDOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	ids, err := tenant.KnownIDs(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{tenant.Provider}, ids, "the provider, before any chain exists")

	k, _ := keys.Generate()
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(t, err)
	var want []uuid.UUID
	for _, name := range []string{"zeta", "alpha"} {
		tn, _, err := tenant.Create(ctx, pool, k, name)
		require.NoError(t, err)
		want = append(want, tn.ID)
	}
	orphan := uuid.New() // a chain head with no tenants row
	_, err = pool.Exec(ctx, `INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at) VALUES ($1, 1, sha256('x'), now())`, orphan)
	require.NoError(t, err)
	want = append(want, orphan, tenant.Provider)

	ids, err = tenant.KnownIDs(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, tenant.ByID(want), ids)
}

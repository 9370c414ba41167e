package workload_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// A --duration load over more tenants than it writes at once must reach
// every tenant, round after round, the way many tenants' traffic does —
// not keep the first Concurrency tenants busy until the time is up (which
// made a "10,000 tenants at 2,000 events/s" lag benchmark an 8-tenant one).
func TestRun_DurationOverMoreTenantsThanConcurrency_WritesEveryTenantInTurn(t *testing.T) {
	d := testkit.NewDeployment(t, 12)
	ctx := context.Background()
	res, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 1, Seed: 7,
		Concurrency: 2, Duration: 3 * time.Second})
	require.NoError(t, err)
	require.Positive(t, res.Stats.Claims)

	rounds := map[uuid.UUID]int{}
	rows, err := d.Pool.Query(ctx, `SELECT tenant_id, count(*) FROM oml.claims WHERE tenant_id = ANY($1) GROUP BY tenant_id`, d.Tenants)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		rounds[id] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, rounds, len(d.Tenants), "every tenant written during the duration")
	lo, hi := int(^uint(0)>>1), 0
	for _, n := range rounds {
		lo, hi = min(lo, n), max(hi, n)
	}
	// Rounds sweep the tenants in turn: no tenant is more than one round
	// ahead of another.
	require.LessOrEqual(t, hi-lo, 1, "claims per tenant: %v", rounds)
	require.Greater(t, hi, 1, "the load kept going past the first round")
}

// Without a duration it is one round per tenant, as before.
func TestRun_NoDuration_OneRoundPerTenant(t *testing.T) {
	d := testkit.NewDeployment(t, 5)
	ctx := context.Background()
	res, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 3, Seed: 8, Concurrency: 2})
	require.NoError(t, err)
	require.EqualValues(t, 15, res.Stats.Claims)
}

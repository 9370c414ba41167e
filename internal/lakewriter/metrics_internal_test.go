package lakewriter

import (
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
)

// TestMetrics_TenantHeld_OneSeriesPerHeldTenantOnly: the per-tenant series
// exist only while a tenant is held, so the label cardinality is the number
// of held tenants, and a released tenant's series goes away.
func TestMetrics_TenantHeld_OneSeriesPerHeldTenantOnly(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	a, b := uuid.New(), uuid.New()
	m.heldTenants([]chainverify.Finding{{Tenant: a, Reason: chainverify.ReasonFork}, {Tenant: b, Reason: chainverify.ReasonTailLost}})
	require.Equal(t, 2, testutil.CollectAndCount(m.TenantHeld))
	require.Equal(t, 2.0, testutil.ToFloat64(m.HeldTenants))
	require.Equal(t, 1.0, testutil.ToFloat64(m.TenantHeld.WithLabelValues(b.String(), string(chainverify.ReasonTailLost))))
	m.heldTenants([]chainverify.Finding{{Tenant: a, Reason: chainverify.ReasonFork}})
	require.Equal(t, 1, testutil.CollectAndCount(m.TenantHeld), "the released tenant's series is gone")
	m.heldTenants(nil)
	require.Zero(t, testutil.CollectAndCount(m.TenantHeld))
	require.Zero(t, testutil.ToFloat64(m.HeldTenants))
}

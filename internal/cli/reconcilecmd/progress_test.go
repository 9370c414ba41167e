package reconcilecmd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/reconcile"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	p := &reconcile.Progress{}
	p.Tenants.Store(3)
	p.TenantsDone.Store(1)
	p.LakeRows.Store(1200)
	require.Equal(t, "reconciling tenant 2/3, 1200 lake rows read, 0 journal events and claims compared", progressLine(p, time.Second))
	p.Total.Store(1000)
	p.Done.Store(250)
	require.Equal(t, "reconciling tenant 2/3, 1200 lake rows read [=======                       ]  25% 250/1000 journal events and claims compared, 2s",
		progressLine(p, 2*time.Second))
	p.TenantsDone.Store(3)
	require.Contains(t, progressLine(p, time.Second), "tenant 3/3")
}

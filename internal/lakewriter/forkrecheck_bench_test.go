package lakewriter_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var benchForkTenants = flag.Int("bench.forktenants", 2000, "tenants BenchmarkForkRecheck checks")

// BenchmarkForkRecheck is the long-running loop's periodic fork check
// alone, over -bench.forktenants tenants each with a bronze table and a
// witness: what it costs beside the batches once a minute.
func BenchmarkForkRecheck(b *testing.B) {
	bb, _ := benchSetupEmpty(b, *benchForkTenants)
	lake := newLake(b, "file")
	o := bb.opts(lake)
	o.WitnessInterval = time.Nanosecond
	d := warmUp(b, o, warmLoad(b, bb, 0.7, 0.2))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		require.NoError(b, d.RecheckForksNow(ctx))
	}
	b.StopTimer()
	require.Empty(b, d.Refused())
}

package chainverify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

// BenchmarkVerifyDB is the end-to-end rate against a real PostgreSQL
// (testdb's throwaway cluster on the same 2 cores): stream oml.journal,
// verify, compare heads. Events are appended through the real append path
// once per sub-benchmark. Run:
//
//	go test -run '^$' -bench VerifyDB -benchtime 3x ./internal/chainverify/
func BenchmarkVerifyDB(b *testing.B) {
	const total = 20000
	ctx := context.Background()
	for _, tenants := range []int{1, 100} {
		// Built once on the parent benchmark: the framework calls each
		// sub-benchmark several times while it sizes b.N.
		pool := testdb.New(b).Pool(b)
		k, err := keys.Generate()
		require.NoError(b, err)
		_, err = tenant.Init(ctx, pool, k)
		require.NoError(b, err)
		d := &deployment{pool: pool, key: k}
		for i := range tenants {
			tn, _, err := tenant.Create(ctx, pool, k, fmt.Sprintf("t%03d", i))
			require.NoError(b, err)
			for left := total/tenants - 1; left > 0; left -= 500 {
				d.appendClaims(b, tn.ID, min(left, 500))
			}
		}
		for _, strict := range []bool{false, true} {
			b.Run(fmt.Sprintf("tenants=%d/strict=%v", tenants, strict), func(b *testing.B) {
				start := time.Now()
				var events int64
				for range b.N {
					rep, err := chainverify.VerifyDB(ctx, pool, chainverify.DBOptions{Full: true, Strict: strict, NoCheckpoint: true})
					require.NoError(b, err)
					require.Empty(b, rep.Findings)
					events += rep.Events
				}
				b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
			})
		}
	}
}

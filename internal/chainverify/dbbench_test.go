package chainverify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
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

// BenchmarkScrub is the cost of doctor's chain check per run: the
// incremental verify (nothing new appended: the provider chain and one
// anchor lookup per chain) plus a scrub of N old events, on 100 tenants of
// 200 events. Run:
//
//	go test -run '^$' -bench Scrub -benchtime 5x ./internal/chainverify/
func BenchmarkScrub(b *testing.B) {
	const tenants, perTenant = 100, 200
	ctx := context.Background()
	d := initDeployment(b)
	pool := d.pool
	for i := range tenants {
		d.appendClaims(b, d.createTenant(b, fmt.Sprintf("t%03d", i)), perTenant-1)
	}
	rep, err := chainverify.VerifyDB(ctx, pool, chainverify.DBOptions{})
	require.NoError(b, err)
	require.Empty(b, rep.Findings)
	for _, budget := range []int64{0, 2000, 10000, 20000} {
		b.Run(fmt.Sprintf("scrub_events=%d", budget), func(b *testing.B) {
			var scrubbed int64
			for range b.N {
				// NoCheckpoint: every iteration scrubs the same (oldest) chains,
				// which costs what scrubbing the next ones would.
				rep, err := chainverify.VerifyDB(ctx, pool, chainverify.DBOptions{
					SinceCheckpoint: true, ScrubEvents: budget, NoCheckpoint: true})
				require.NoError(b, err)
				require.Empty(b, rep.Findings)
				scrubbed += rep.ScrubEvents
			}
			b.ReportMetric(float64(scrubbed)/float64(b.N), "scrubbed_events/op")
		})
	}
}

// BenchmarkProviderTrustCache is a witness publication's read of the
// issued keys over a provider chain of 2,000 tenants (one event each),
// through a cache that has verified it: read=held_back reads and
// hash-checks the whole chain again (signatures held back up to the
// verified head), read=fingerprint compares the chain's fingerprint and
// reads nothing.
func BenchmarkProviderTrustCache(b *testing.B) {
	const tenants = 2000
	ctx := context.Background()
	d := initDeployment(b)
	pool, k := d.pool, d.key
	for i := range tenants {
		d.createTenant(b, fmt.Sprintf("t%04d", i))
	}
	for _, read := range []string{"held_back", "fingerprint"} {
		b.Run("read="+read, func(b *testing.B) {
			var c chainverify.ProviderTrustCache
			_, err := c.IssuedKeys(ctx, pool)
			require.NoError(b, err)
			for range b.N {
				if read == "held_back" {
					c.ForgetRead()
				}
				trusted, err := c.IssuedKeys(ctx, pool)
				require.NoError(b, err)
				if _, ok := trusted(k.KeyID(), uuid.Nil, 1); !ok {
					b.Fatal("the root key is not trusted")
				}
			}
		})
	}
}

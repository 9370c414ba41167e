package chain_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

// BenchmarkAppend measures events/s through the real append path with 8
// concurrent writers, for 1 and 16 tenants, one event per transaction and
// batches of 100. Each event is a claim.submitted with a 256-byte body.
//
// The throwaway test cluster runs with fsync off, so by default this
// measures the CPU and round-trip cost; to include the commit flush (the
// per-tenant ceiling), point OML_TEST_DATABASE_URL at a server with fsync on.
func BenchmarkAppend(b *testing.B) {
	// Reference: one writer, one tenant, one event per commit (latency-bound).
	b.Run("tenants=1/writers=1/batch=1", func(b *testing.B) { benchAppend(b, 1, 1, 1) })
	b.Run("tenants=1/writers=1/batch=100", func(b *testing.B) { benchAppend(b, 1, 1, 100) })
	for _, tenants := range []int{1, 16} {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("tenants=%d/writers=8/batch=%d", tenants, batch), func(b *testing.B) {
				benchAppend(b, tenants, 8, batch)
			})
		}
	}
}

func benchAppend(b *testing.B, tenants, writers, batch int) {
	ctx := context.Background()
	db := testdb.New(b)
	pool, err := pgconn.Open(ctx, db.URL, pgconn.Options{MaxConns: int32(writers + 2)})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	k, err := keys.Generate()
	require.NoError(b, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(b, err)
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		tn, _, err := tenant.Create(ctx, pool, k, fmt.Sprintf("bench-%d", i))
		require.NoError(b, err)
		ids[i] = tn.ID
	}
	body := make([]byte, 256)
	dek := make([]byte, 32)
	sum := digest(body)
	mk := func(n int64) journal.Event {
		ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
			ArtifactID: fmt.Sprintf("a%d", n), Version: 1, WorkareaID: "wa", Writer: "w", Principal: "p",
			Provenance: "agent", PlaintextDigest: sum, CiphertextDigest: sum,
		}, body, dek)
		if err != nil {
			panic(err)
		}
		return ev
	}
	appends := (b.N + batch - 1) / batch
	var next, artifact atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]journal.Event, batch)
			for {
				i := next.Add(1) - 1
				if i >= int64(appends) {
					return
				}
				for j := range evs {
					evs[j] = mk(artifact.Add(1))
				}
				tn := ids[(int(i)+w)%tenants]
				if _, err := chain.Append(ctx, pool, k, tn, evs...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(appends*batch)/elapsed.Seconds(), "events/s")
}

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

// BenchmarkAppendEnforcement puts the append path with the database's
// chain-shape enforcement (migration 004: the journal_extends_chain trigger,
// which also keeps oml.chain_heads, and outbox_names_journal_event) next to
// the same path with both triggers dropped, case by case in one run. The
// baseline is conservative: without the trigger nothing maintains
// chain_heads at all, while the path before 004 updated it from Go, so the
// difference overstates what the enforcement costs.
//
//	go test -run '^$' -bench BenchmarkAppendEnforcement -count 3 ./internal/chain/
func BenchmarkAppendEnforcement(b *testing.B) {
	cases := []struct{ tenants, writers, batch int }{{1, 1, 1}, {1, 1, 100}, {16, 8, 1}, {16, 8, 100}}
	for _, c := range cases {
		name := fmt.Sprintf("tenants=%d/writers=%d/batch=%d", c.tenants, c.writers, c.batch)
		b.Run(name+"/enforced", func(b *testing.B) { benchAppendWith(b, c.tenants, c.writers, c.batch, false) })
		b.Run(name+"/unenforced", func(b *testing.B) { benchAppendWith(b, c.tenants, c.writers, c.batch, true) })
	}
}

func benchAppend(b *testing.B, tenants, writers, batch int) {
	benchAppendWith(b, tenants, writers, batch, false)
}

func benchAppendWith(b *testing.B, tenants, writers, batch int, unenforced bool) {
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
	if unenforced {
		_, err := pool.Exec(ctx, `DROP TRIGGER journal_extends_chain ON oml.journal;
		                          DROP TRIGGER outbox_names_journal_event ON oml.outbox`)
		require.NoError(b, err)
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

package lakewriter_test

import (
	"context"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// TestWitness_FailedPublication_IsRetriedByTheNextBatch: the store refuses
// the first witness put. The tenant is not counted as witnessed: the next
// batch publishes its head, although the witness interval (an hour) has
// not passed.
func TestWitness_FailedPublication_IsRetriedByTheNextBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tenant := b.tenants[0]
	b.load(t, workload.Config{Claims: 3, Seed: 91})
	lake := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent},
		Key: witness.Prefix + tenant.String() + "/*.json", Times: 1, Kind: store.FaultError})
	o := b.opts(lake)
	o.WitnessInterval = time.Hour
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)
	require.NotContains(t, witnessedSeqs(t, lake), tenant.String(), "the first put failed")

	b.load(t, workload.Config{Claims: 2, Seed: 92})
	b.drainAll(t, d)
	var head int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, tenant).Scan(&head))
	require.Equal(t, path.Base(witness.Key(tenant, head)), witnessedSeqs(t, lake)[tenant.String()],
		"the next batch published the head the failed publication left out")
}

package bronze_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// drainedInBatches is one tenant's workload of claims (half promoted)
// drained into lake in batches of batchRows outbox rows, so bronze is
// many small data files: what ReadHead's file pruning is measured and
// tested on.
func drainedInBatches(tb testing.TB, lake store.Store, claims int, seed uint64, batchRows int) *testkit.Deployment {
	tb.Helper()
	d := testkit.NewDeployment(tb, 1)
	_, err := workload.Run(context.Background(), d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: claims, Seed: seed, PromoteRatio: 0.5})
	require.NoError(tb, err)
	o := d.DrainOptions(lake)
	o.Limits = outbox.Limits{Rows: batchRows}
	o.WitnessInterval = -1
	o.HorizonTimeout = 20 * time.Second
	w, err := lakewriter.New(o)
	require.NoError(tb, err)
	d.DrainAll(tb, w)
	return d
}

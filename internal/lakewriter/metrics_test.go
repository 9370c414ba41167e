package lakewriter_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

func TestMetrics_CountBatchesRowsDeadLettersAndFrontier(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 15, Seed: 31, Poison: 1})
	reg := prometheus.NewRegistry()
	m := lakewriter.NewMetrics(reg)
	o := b.opts(store.NewMem())
	o.Metrics = m
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)

	require.Positive(t, testutil.ToFloat64(m.Batches))
	require.Positive(t, testutil.ToFloat64(m.Rows.WithLabelValues("bronze.events")))
	require.Positive(t, testutil.ToFloat64(m.Rows.WithLabelValues("silver.claims")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters))
	require.Positive(t, testutil.ToFloat64(m.Retries.WithLabelValues("poison")))
	require.Equal(t, float64(d.Frontier()), testutil.ToFloat64(m.Frontier))
	require.Positive(t, testutil.CollectAndCount(m.CommitLatency))
	require.Positive(t, testutil.ToFloat64(m.LastBatch), "the last-batch timestamp feeds the writer-stalled alert")
	require.Zero(t, testutil.ToFloat64(m.HeldTenants))
}

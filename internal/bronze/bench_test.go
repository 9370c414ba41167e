package bronze_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// BenchmarkReadHead is the fork check's bronze cost per tenant on a file
// lake: load the table's log, pick the file holding the newest seq by its
// statistics, read two columns of it.
func BenchmarkReadHead(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, 1)
	_, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 200, Seed: 9, PromoteRatio: 0.5})
	require.NoError(b, err)
	lake, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	o := d.DrainOptions(lake)
	o.Limits = outbox.Limits{Rows: 50}
	o.WitnessInterval = -1
	o.HorizonTimeout = 20 * time.Second
	w, err := lakewriter.New(o)
	require.NoError(b, err)
	d.DrainAll(b, w)
	b.ResetTimer()
	for b.Loop() {
		if _, ok, err := bronze.ReadHead(ctx, lake, d.Tenants[0]); err != nil || !ok {
			b.Fatal(err, ok)
		}
	}
}

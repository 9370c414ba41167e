package bundle_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

var benchClaims = flag.Int("bundle.claims", 5000, "claims in the benchmark tenant's chain")

// BenchmarkVerify_BundleVersusDatabase verifies the same chain twice in
// one run: from an exported bundle file (no database) and from PostgreSQL
// (oml chain verify --full --tenant), and reports events/s for each.
//
//	go test -run '^$' -bench BundleVersusDatabase -benchtime 5x ./internal/bundle/
func BenchmarkVerify_BundleVersusDatabase(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, 1)
	_, err := workload.Run(ctx, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: *benchClaims, PromoteRatio: 0.7, RetractRatio: 0.3, Seed: 1})
	require.NoError(b, err)
	path := filepath.Join(b.TempDir(), "bench.bundle")
	f, err := os.Create(path)
	require.NoError(b, err)
	tr, err := bundle.Export(ctx, d.Pool, f, bundle.ExportOptions{Tenant: d.Tenants[0]})
	require.NoError(b, err)
	require.NoError(b, f.Close())
	events := float64(tr.Events + tr.ProviderEvents)
	tenant := d.Tenants[0]

	b.Run("bundle", func(b *testing.B) {
		for b.Loop() {
			res, err := bundle.VerifyFile(ctx, path, bundle.VerifyOptions{})
			require.NoError(b, err)
			require.True(b, res.OK())
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("database", func(b *testing.B) {
		for b.Loop() {
			rep, err := chainverify.VerifyDB(ctx, d.Pool, chainverify.DBOptions{Tenant: &tenant, Full: true, NoCheckpoint: true})
			require.NoError(b, err)
			require.Empty(b, rep.Findings)
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// BenchmarkDrainGold measures the drain rate of the mixed workload
// (promotions with bodies, retracts, chained changes) with gold on
// (gold.lineage and gold.workareas: the outbox as the fold writes it), with
// gold.lineage only (its gold.workareas rows deleted from the outbox behind
// the append path before the drain), and with gold off (both deleted: what
// the lake writer did before gold), in the same run, on the local store.
// rows/s counts the outbox rows applied (gold rows included when on);
// events/s the journal events made lake-visible per second, the figure
// comparable across the three.
func BenchmarkDrainGold(b *testing.B) {
	for _, v := range []struct {
		name    string
		without string // the targets deleted before the drain
	}{
		{"gold=on", ""},
		{"gold=lineage", "'gold.workareas'"},
		{"gold=off", "'gold.lineage', 'gold.workareas'"},
	} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			bb, _ := benchSetupEmpty(b, *benchTenants)
			cfg := workload.Config{Tenants: bb.tenants, Claims: 3, Seed: 98, PromoteRatio: 0.99, RetractRatio: 0.5, Batch: 3, Concurrency: 8}
			_, err := workload.Run(ctx, bb.pool, bb.key, cfg)
			require.NoError(b, err)
			warm := bb.lastSeq(b)
			cfg.Claims, cfg.Seed, cfg.PromoteRatio, cfg.RetractRatio, cfg.FollowUpRatio, cfg.Batch = *benchClaims, 99, 0.7, 0.3, 0.5, 20
			_, err = workload.Run(ctx, bb.pool, bb.key, cfg)
			require.NoError(b, err)
			if v.without != "" {
				_, err := bb.pool.Exec(ctx, `SET session_replication_role = replica; DELETE FROM oml.outbox WHERE target IN (`+v.without+`); SET session_replication_role = DEFAULT`)
				require.NoError(b, err)
			}
			var events, goldRows int64
			require.NoError(b, bb.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE target = 'bronze.events' AND seq > $1),
				count(*) FILTER (WHERE target IN ('gold.lineage', 'gold.workareas') AND seq > $1) FROM oml.outbox`, warm).Scan(&events, &goldRows))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				resetFrontier(b, bb)
				o := drainBenchOpts(bb, newLake(b, "file"))
				warmUp(b, o, warm)
				d, err := lakewriter.New(o)
				require.NoError(b, err)
				b.StartTimer()
				start := time.Now()
				sum, err := d.DrainOnce(ctx)
				require.NoError(b, err)
				el := time.Since(start) - sum.RecoverDuration
				b.ReportMetric(float64(sum.Rows)/el.Seconds(), "rows/s")
				b.ReportMetric(float64(events)/el.Seconds(), "events/s")
				b.ReportMetric(float64(sum.Rows), "rows")
				b.ReportMetric(float64(goldRows), "gold_rows")
				b.ReportMetric(float64(sum.TableCommits), "commits")
			}
		})
	}
}

package doctor_test

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/workload"
)

var (
	benchTenants = flag.Int("doctor.tenants", 1000, "BenchmarkDoctor_ManyTables: tenants to build (one promoted claim each: bronze, silver and gold, 3 tables a tenant)")
	benchDBURL   = flag.String("doctor.database-url", "", "BenchmarkDoctor_ManyTables: run on this deployment instead of building one (scripts/bench passes it)")
	benchLake    = flag.String("doctor.lake", "", "BenchmarkDoctor_ManyTables: the lake of -doctor.database-url (file:///... or s3://...)")
)

// BenchmarkDoctor_ManyTables is issue 14's doctor figure: one doctor run
// (every check but --deep) over a lake with many tables, in the steady
// state (a first run stored the verified heads). It builds -doctor.tenants
// tenants through the real append path and drains them once per benchmark
// run (minutes at 7,000 tenants: not part of go test without -bench), or,
// with -doctor.database-url and -doctor.lake, runs on a deployment built
// already (scripts/bench builds one with oml dev load). Two sub-benchmarks:
// summary (the lake summary serves the unchanged tables) and full-read
// (every table read in full, the baseline in the same run).
//
//	go test -run '^$' -bench Doctor_ManyTables -benchtime 3x ./internal/doctor/ -args -doctor.tenants 7000
func BenchmarkDoctor_ManyTables(b *testing.B) {
	ctx := context.Background()
	var opts doctor.Options
	if *benchDBURL != "" {
		pool, err := pgxpool.New(ctx, *benchDBURL)
		require.NoError(b, err)
		b.Cleanup(pool.Close)
		lake, err := store.Open(ctx, *benchLake)
		require.NoError(b, err)
		opts = doctor.Options{
			DB:   func(context.Context) (*pgxpool.Pool, error) { return pool, nil },
			Lake: func(context.Context) (store.Store, error) { return lake, nil },
		}
	} else {
		d := setup(b, *benchTenants)
		_, err := workload.Run(ctx, d.pool, d.key, workload.Config{Tenants: d.tenants, Claims: 1, PromoteRatio: 1, Seed: 1})
		require.NoError(b, err)
		d.drain(b, nil)
		d.witnessAll(b)
		opts = d.options(nil)
	}
	opts.Timeout = 10 * time.Minute // the figure is the point, not a timeout
	doctor.Run(ctx, opts)           // stores the verified heads and the lake summary: the steady state follows
	// The baseline in the same run: every table read in full, as before
	// the lake summary (internal/lakesummary).
	for _, mode := range []struct {
		name string
		off  bool
	}{{"summary", false}, {"full-read", true}} {
		b.Run(mode.name, func(b *testing.B) {
			o := opts
			o.NoSummary = mode.off
			var rep doctor.Report
			for b.Loop() {
				rep = doctor.Run(ctx, o)
			}
			b.StopTimer()
			report(b, rep)
		})
	}
}

func report(b *testing.B, rep doctor.Report) {
	delta := check(b, rep, doctor.IDDelta)
	for _, c := range rep.Checks {
		if c.Status == doctor.StatusFail {
			b.Errorf("%s failed: %s %v", c.ID, c.Summary, c.Details)
		}
		b.ReportMetric(c.DurationSeconds*1e3, "ms-"+c.ID)
	}
	b.ReportMetric(float64(toInt(delta.Data["tables"])), "tables")
	b.ReportMetric(float64(toInt(delta.Data["tables_read"])), "tables-read")
	b.Logf("lake %s; %s", filepath.Base(*benchLake), delta.Summary)
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return -1
}

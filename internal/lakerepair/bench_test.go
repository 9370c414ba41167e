package lakerepair_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// benchUnexpected is how many forged rows BenchmarkRepairUnexpected plants.
const benchUnexpected = 100_000

// BenchmarkRepairUnexpected measures `oml lake repair` removing 100,000
// unexpected rows (bronze rows of journal events that do not exist) from
// one table: the reconcile audit that finds them, the scan for the files
// holding them, the archive of every one, the copy-on-write commit, the
// confirming audit and the journal event. Reported as rows/s.
//
//	go test -run '^$' -bench BenchmarkRepairUnexpected -benchtime 1x ./internal/lakerepair/
func BenchmarkRepairUnexpected(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, 1)
	lake := testkit.FileLake(b)
	testkit.Load(b, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 20, Seed: 7, PromoteRatio: 0.7})
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	w, err := lakewriter.New(e.drainOpts())
	require.NoError(b, err)
	d.DrainAll(b, w)
	st, err := store.Sub(lake, tables.TableKey{Tenant: d.Tenants[0], Kind: tables.Bronze}.Path())
	require.NoError(b, err)
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		plantForged(b, st, benchUnexpected, int64(1_000_000*(i+1)))
		start := time.Now()
		res, err := lakerepair.Run(ctx, lakerepair.Options{Pool: d.Pool, Lake: lake, Signer: d.Key, By: "bench", NoLease: true})
		elapsed += time.Since(start)
		require.NoError(b, err)
		require.Zero(b, res.Remaining)
		require.Len(b, res.Repaired, 1)
		require.EqualValues(b, benchUnexpected, res.Repaired[0].RowsArchived)
	}
	b.ReportMetric(float64(benchUnexpected)*float64(b.N)/elapsed.Seconds(), "rows/s")
}

// plantForged appends one file of n bronze rows for journal seqs from
// base on, copies of a real row: unexpected-in-lake, every one.
func plantForged(b *testing.B, st store.Store, n int, base int64) {
	b.Helper()
	ctx := context.Background()
	w, err := delta.OpenWriter(ctx, st, delta.Options{})
	require.NoError(b, err)
	var model pq.Row
	require.NoError(b, w.Snapshot().Scan(ctx, st, delta.ScanOptions{BatchRows: 1}, func(_ *delta.Add, rs []pq.Row) error {
		if model == nil {
			model = append(pq.Row(nil), rs[0]...)
		}
		return nil
	}))
	rows := make([]pq.Row, n)
	for i := range rows {
		r := append(pq.Row(nil), model...)
		r[1] = base + int64(i)
		rows[i] = r
	}
	add, err := w.WriteFile(ctx, map[string]*string{}, rows)
	require.NoError(b, err)
	_, err = w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add}})
	require.NoError(b, err)
}

// BenchmarkRepairAfterPrune measures `oml lake repair` putting back a
// tenant's whole bronze and silver tables whose data files were lost from
// the store: first with every outbox row still there (not-pruned), then
// after `oml outbox prune` deleted every one (pruned: every row is
// re-derived from the journal, journal.DeriveOutbox, one replay of the
// chain per table), each time checked and written, then the confirming
// audits and the journal event. Reported as rows put back per second.
//
//	go test -run '^$' -bench BenchmarkRepairAfterPrune -benchtime 1x ./internal/lakerepair/
func BenchmarkRepairAfterPrune(b *testing.B) {
	ctx := context.Background()
	d := testkit.NewDeployment(b, 1)
	lake := testkit.FileLake(b)
	testkit.Load(b, d.Pool, d.Key, workload.Config{Tenants: d.Tenants, Claims: 3000, Seed: 7, PromoteRatio: 0.7, RetractRatio: 0.3})
	e := &env{pool: d.Pool, key: d.Key, lake: lake}
	w, err := lakewriter.New(e.drainOpts())
	require.NoError(b, err)
	d.DrainAll(b, w)
	run := func(b *testing.B) {
		var elapsed time.Duration
		var rows int64
		for i := 0; i < b.N; i++ {
			for _, k := range []tables.Kind{tables.Bronze, tables.Silver} {
				st, err := store.Sub(lake, tables.TableKey{Tenant: d.Tenants[0], Kind: k}.Path())
				require.NoError(b, err)
				snap, err := delta.Load(ctx, st)
				require.NoError(b, err)
				for _, f := range snap.Files() {
					p, err := delta.DecodePath(f.Path)
					require.NoError(b, err)
					require.NoError(b, st.Delete(ctx, p))
				}
			}
			start := time.Now()
			res, err := lakerepair.Run(ctx, lakerepair.Options{Pool: d.Pool, Lake: lake, Signer: d.Key, By: "bench", NoLease: true})
			elapsed += time.Since(start)
			require.NoError(b, err)
			require.Zero(b, res.Remaining, "%+v", res.Plan)
			n, err := putBack(ctx, lake, res)
			require.NoError(b, err)
			rows += n
		}
		b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
		b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
	}
	b.Run("not-pruned", run)
	pr, err := outboxprune.Run(ctx, outboxprune.Options{DB: d.Pool, Lake: lake})
	require.NoError(b, err)
	require.Positive(b, pr.Rows)
	b.Run("pruned", run)
}

// putBack sums numAddedRows over a run's repair commits.
func putBack(ctx context.Context, lake store.Store, res *lakerepair.Result) (int64, error) {
	var n int64
	for _, r := range res.Repaired {
		st, err := store.Sub(lake, r.Path)
		if err != nil {
			return 0, err
		}
		hist, err := delta.History(ctx, st, delta.HistoryOptions{})
		if err != nil {
			return 0, err
		}
		for _, h := range hist {
			if h.Version == r.DeltaVersion {
				var v struct {
					OmlRepair struct {
						RowsAdded int64 `json:"rowsAdded"`
					} `json:"omlRepair"`
				}
				if err := json.Unmarshal(h.CommitInfo, &v); err != nil {
					return 0, err
				}
				n += v.OmlRepair.RowsAdded
			}
		}
	}
	return n, nil
}

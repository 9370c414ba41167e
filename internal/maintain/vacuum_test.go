package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// After a compaction, the version before it is inside the retention window
// for 7 days: vacuum (at the table's retention) must leave every file it
// references, so a reader pinned to it still reads all its rows. Once the
// window has passed, vacuum deletes those files and nothing the current
// version needs.
func TestVacuum_KeepsWhatTheRetentionWindowReferences_DeletesTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 30, PromoteRatio: 0.8, RetractRatio: 0.3, Seed: 3, Concurrency: 1})
	b.drainAll(t, b.drainer(t, 8))

	tabs, err := maintain.Tables(b.lake, b.Tenants, []tables.Kind{tables.Bronze, tables.Silver})
	require.NoError(t, err)
	type pinned struct {
		version int64
		rows    int
	}
	pins := map[string]pinned{}
	for _, tab := range tabs {
		snap, err := delta.Load(ctx, tab.Store)
		require.NoError(t, err)
		pins[tab.Key.Path()] = pinned{snap.Version(), len(readRows(t, tab.Store))}
		r, err := maintain.Compact(ctx, tab, maintain.CompactOptions{TargetSize: 64 << 20, MinFiles: 2})
		require.NoError(t, err)
		require.Positive(t, r.FilesRemoved, "%s: nothing to compact, the test proves nothing", tab.Key)
	}

	// Three days later: inside the window.
	for _, tab := range tabs {
		p := pins[tab.Key.Path()]
		vr, _, err := maintain.VacuumTable(ctx, tab, delta.VacuumOptions{Now: time.Now().Add(3 * 24 * time.Hour)})
		require.NoError(t, err)
		require.Empty(t, vr.Deleted, "%s: vacuum inside the retention window deleted files", tab.Key)
		require.Len(t, testkit.ReadTable(t, tab.Store, testkit.Read{At: delta.AtVersion(p.version)}), p.rows, "%s: a reader pinned to v%d lost rows", tab.Key, p.version)
	}

	// Eight days later: the pre-compaction files are outside it.
	for _, tab := range tabs {
		p := pins[tab.Key.Path()]
		vr, _, err := maintain.VacuumTable(ctx, tab, delta.VacuumOptions{Now: time.Now().Add(8 * 24 * time.Hour)})
		require.NoError(t, err)
		deleted := map[string]bool{}
		for _, k := range vr.Deleted {
			deleted[k] = true
		}
		snap, err := delta.Load(ctx, tab.Store, delta.AtVersion(p.version))
		require.NoError(t, err)
		for _, a := range snap.Files() {
			k, err := delta.DecodePath(a.Path)
			require.NoError(t, err)
			require.True(t, deleted[k], "%s: %s, replaced by the compaction, was not vacuumed", tab.Key, k)
		}
		cur, err := delta.Load(ctx, tab.Store)
		require.NoError(t, err)
		for _, a := range cur.Files() {
			k, _ := delta.DecodePath(a.Path)
			require.False(t, deleted[k], "%s: vacuum deleted the live file %s", tab.Key, k)
		}
		err = snap.Scan(ctx, tab.Store, delta.ScanOptions{}, func(*delta.Add, []pq.Row) error { return nil })
		require.Error(t, err, "%s: the old version's files should be gone", tab.Key)
		require.Len(t, readRows(t, tab.Store), p.rows, "%s: the current version lost rows", tab.Key)

		// The deletions are recorded as Spark does: VACUUM START, VACUUM END,
		// commitInfo-only commits, and they count as commits for the
		// checkpoint policy.
		hist, err := delta.History(ctx, tab.Store, delta.HistoryOptions{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"VACUUM END", "VACUUM START"}, []string{hist[0].Operation, hist[1].Operation}, "%s", tab.Key)
		require.Equal(t, []int64{vr.EndVersion, vr.StartVersion}, []int64{hist[0].Version, hist[1].Version})
		for _, h := range hist {
			require.Empty(t, h.Txns)
			require.Zero(t, h.AddedFiles+h.RemovedFiles)
		}
		m, err := maintain.Measure(ctx, tab, maintain.MeasureOptions{})
		require.NoError(t, err)
		require.Equal(t, vr.EndVersion, m.Version)
	}
	// A new lake writer recovers its newest recorded batch past the vacuum
	// commits (they carry no omlBatch) and drains on; the lake stays exact.
	b.load(t, workload.Config{Claims: 10, PromoteRatio: 0.8, Seed: 4, Concurrency: 1})
	b.drainAll(t, b.drainer(t, 8))
	b.verifyLake(t)
}

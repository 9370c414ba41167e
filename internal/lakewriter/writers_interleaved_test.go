package lakewriter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// pauseAtFirstDataFiles is a crash hook that stops the writer after the
// data files of its first table are written, before the commit, until
// resume is closed. paused is closed when it stops; key is that table.
type pauseAtFirstDataFiles struct {
	once   sync.Once
	paused chan struct{}
	resume chan struct{}
	key    tables.TableKey
}

func newPause() *pauseAtFirstDataFiles {
	return &pauseAtFirstDataFiles{paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pauseAtFirstDataFiles) hook(point lakewriter.CrashPoint, key tables.TableKey) error {
	if point != lakewriter.AfterDataFiles {
		return nil
	}
	first := false
	p.once.Do(func() { first = true })
	if first {
		p.key = key
		close(p.paused)
		<-p.resume
	}
	return nil
}

// TestTwoWriters_Interleaved_DeltaFenceKeepsExactlyOnce is the
// deterministic counterpart of the racy two-writer test: writer A cuts one
// batch over the whole outbox and stops after writing its first table's
// data files; writer B (no lease, as after a partition) then commits to
// that table first — either a smaller batch that ends inside A's
// (b-behind) or the whole outbox (b-ahead). A resumes, loses the commit
// race for that version, and must neither apply B's rows again nor lose
// its own; the lake is exact.
// Mutations this catches: the filter that skips rows at or below a
// table's txn version dropped (b-behind: B's rows twice), and a lost race
// taken as "the other writer applied this batch" (b-behind: A's rows after
// B's end missing).
func TestTwoWriters_Interleaved_DeltaFenceKeepsExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"b-behind", "b-ahead"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, 2)
			b.load(t, workload.Config{Claims: 10, Seed: 71, RetractRatio: 0.5})
			last := b.lastSeq(t)
			lake := store.NewMem()

			pause := newPause()
			oa := b.opts(lake)
			oa.Holder = "writer-a"
			oa.Limits = lakewriterLimits(1_000_000)
			oa.Parallel = 1
			oa.Crash = pause.hook
			a, err := lakewriter.New(oa)
			require.NoError(t, err)
			aDone := make(chan error, 1)
			go func() { _, err := a.DrainOnce(ctx); aDone <- err }()
			select {
			case <-pause.paused:
			case err := <-aDone:
				t.Fatalf("writer A ended before writing any data files: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("writer A never reached its first table's data files")
			}
			key := pause.key

			// B's batch end: for b-behind, the first of the table's rows,
			// so the table has rows both in B's batch and after it.
			ob := b.opts(lake)
			ob.Holder = "writer-b"
			ob.Limits = lakewriterLimits(7)
			var tableRows []int64
			rows, err := b.pool.Query(ctx, `SELECT seq FROM oml.outbox WHERE tenant_id = $1 AND target = $2 ORDER BY seq`,
				key.Tenant, string(key.Kind))
			require.NoError(t, err)
			for rows.Next() {
				var s int64
				require.NoError(t, rows.Scan(&s))
				tableRows = append(tableRows, s)
			}
			require.NoError(t, rows.Err())
			require.GreaterOrEqual(t, len(tableRows), 2, "table %s needs rows on both sides of B's end", key)
			bEnd := last
			if mode == "b-behind" {
				bEnd = tableRows[0]
				ob.StopAt = bEnd
			}
			wb, err := lakewriter.New(ob)
			require.NoError(t, err)
			_, err = wb.DrainOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, bEnd, wb.Frontier())
			bVersion := txnVersion(t, lake, key)
			require.GreaterOrEqual(t, bVersion, tableRows[0], "B committed to the table A is paused on")
			if mode == "b-behind" {
				require.Equal(t, bEnd, bVersion)
			}

			close(pause.resume)
			require.NoError(t, <-aDone)
			require.Equal(t, last, a.Frontier())

			// A really lost a race on the table: B's commit is in its log
			// before A's.
			st, err := store.Sub(lake, key.Path())
			require.NoError(t, err)
			hist, err := delta.History(ctx, st, delta.HistoryOptions{})
			require.NoError(t, err)
			var txns []int64
			for i := len(hist) - 1; i >= 0; i-- {
				for _, tx := range hist[i].Txns {
					if tx.AppID == tables.AppID {
						txns = append(txns, tx.Version)
					}
				}
			}
			require.NotEmpty(t, txns)
			require.LessOrEqual(t, txns[0], bVersion, "B's commit comes first in the table's log")
			if mode == "b-behind" {
				require.Equal(t, last, txns[len(txns)-1], "A committed the rest of its batch on top of B's")
			} else {
				require.Equal(t, bVersion, txns[len(txns)-1], "A had nothing left to commit to the table")
			}
			b.verifyLake(t, lake)
		})
	}
}

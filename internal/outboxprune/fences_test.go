package outboxprune_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/workload"
)

func (b *bundle) countWhere(t *testing.T, where string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.Pool.QueryRow(context.Background(), `SELECT count(*) FROM oml.outbox o WHERE `+where, args...).Scan(&n))
	return n
}

// The fences: a table that is behind (its txn version below the others')
// keeps every row above its txn version; nothing above the frontier cache
// goes; rows younger than the retention stay; dead-lettered rows, and a
// re-enqueued dead letter's copy (and what follows it in its table), stay.
// Dropping the txn-version condition from outbox.Prune's bound fails this
// test (the behind table loses its rows).
func TestPrune_NeverAboveATablesTxnVersionNorTheFrontier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	lake := store.NewMem()
	res := b.load(t, workload.Config{Claims: 30, Seed: 21, Poison: 2})
	b.DrainAll(t, b.drainer(t, lake, nil))
	// One dead letter repaired and re-enqueued: its copy is applied, and
	// more rows follow it in its table.
	p0 := res.Poison[0]
	require.Equal(t, workload.PoisonDigestMismatch, p0.Kind)
	_, err := b.Pool.Exec(ctx, `UPDATE oml.claim_bodies SET ciphertext = $4 WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
		p0.Tenant, p0.ArtifactID, p0.Version, p0.Body)
	require.NoError(t, err)
	var dl int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT id FROM oml.dead_letter WHERE outbox_seq = $1`, res.Poison[0].OutboxSeq).Scan(&dl))
	var rr []deadletter.Result
	rr, err = deadletter.Reenqueue(ctx, b.Pool, b.Key, []int64{dl}, deadletter.Options{By: "test"})
	require.NoError(t, err)
	require.Equal(t, deadletter.OutcomeReenqueued, rr[0].Outcome, "%+v", rr[0])
	b.load(t, workload.Config{Claims: 5, Seed: 22, FirstRound: 1})
	b.DrainAll(t, b.drainer(t, lake, nil))

	bounds, err := outboxprune.Bounds(ctx, b.Pool, lake)
	require.NoError(t, err)
	// Tenant 0's bronze table is behind: half its rows.
	behind := -1
	var mid int64
	for i, bd := range bounds {
		if bd.Tenant == b.Tenants[0] && bd.Target == string(tables.Bronze) {
			behind = i
			require.NoError(t, b.Pool.QueryRow(ctx, `SELECT seq FROM oml.outbox WHERE tenant_id = $1 AND target = $2 ORDER BY seq OFFSET 30 LIMIT 1`,
				bd.Tenant, bd.Target).Scan(&mid))
			bounds[i].TxnVersion = mid
		}
	}
	require.GreaterOrEqual(t, behind, 0)
	aboveBehind := b.countWhere(t, `tenant_id = $1 AND target = 'bronze.events' AND seq > $2`, b.Tenants[0], mid)
	require.Positive(t, aboveBehind)

	// Young rows: nothing goes.
	young, err := outbox.Prune(ctx, b.Pool, b.Pool, outbox.PruneOptions{Tables: bounds, OlderThan: time.Hour})
	require.NoError(t, err)
	require.Zero(t, young.Rows, "every row is younger than an hour")

	// The frontier cache below the lake: nothing above it goes. It is
	// lowered below the copy's table's last row before the copy too, so
	// the prune after it is put back has rows of that table to take and
	// reports where the copy stopped them: at half the frontier alone, a
	// table whose rows before the copy all lie below half (its tenant's
	// appends ran first) was pruned up to the copy by the first prune,
	// and the second, which lists only the tables it pruned, did not list
	// it.
	var frontier, beforeCopy int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT frontier FROM oml.lake_frontier`).Scan(&frontier))
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT max(o.seq) FROM oml.dead_letter d
JOIN oml.outbox c ON c.seq = d.new_outbox_seq
JOIN oml.outbox o ON o.tenant_id = c.tenant_id AND o.target = c.target AND o.seq < c.seq
WHERE d.id = $1 AND NOT EXISTS (SELECT 1 FROM oml.dead_letter x WHERE x.outbox_seq = o.seq)`, dl).Scan(&beforeCopy))
	low := min(frontier/2, beforeCopy-1)
	_, err = b.Pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = $1`, low)
	require.NoError(t, err)
	aboveLow := b.countWhere(t, `seq > $1`, low)
	before := b.outboxRows(t)
	dry, err := outbox.Prune(ctx, b.Pool, b.Pool, outbox.PruneOptions{Tables: bounds, DryRun: true})
	require.NoError(t, err)
	require.Positive(t, dry.Rows)
	require.Equal(t, before, b.outboxRows(t), "a dry run deletes nothing")
	got, err := outbox.Prune(ctx, b.Pool, b.Pool, outbox.PruneOptions{Tables: bounds, BatchRows: 10})
	require.NoError(t, err)
	require.Equal(t, dry.Rows, got.Rows)
	require.Equal(t, aboveLow, b.countWhere(t, `seq > $1`, low), "nothing above the frontier cache is pruned")
	_, err = b.Pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = $1`, frontier)
	require.NoError(t, err)

	got, err = outbox.Prune(ctx, b.Pool, b.Pool, outbox.PruneOptions{Tables: bounds, BatchRows: 10})
	require.NoError(t, err)
	require.Positive(t, got.Rows)
	require.Equal(t, aboveBehind, b.countWhere(t, `tenant_id = $1 AND target = 'bronze.events' AND seq > $2`, b.Tenants[0], mid),
		"a table that is behind keeps every row above its txn version")
	require.Less(t, b.countWhere(t, `tenant_id = $1 AND target = 'bronze.events' AND seq <= $2`, b.Tenants[0], mid), int64(31),
		"the rows it has applied do go")
	// Dead letters: the originals and the copy are all still there.
	var missing int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter d
WHERE NOT EXISTS (SELECT 1 FROM oml.outbox o WHERE o.seq = d.outbox_seq)
   OR (d.new_outbox_seq IS NOT NULL AND NOT EXISTS (SELECT 1 FROM oml.outbox o WHERE o.seq = d.new_outbox_seq))`).Scan(&missing))
	require.Zero(t, missing, "no dead-lettered row and no re-enqueued copy is ever pruned")
	stopped := false
	for _, tp := range got.Tables {
		stopped = stopped || tp.StoppedBy == outbox.StopCopy
	}
	require.True(t, stopped, "the copy stops its table's prefix: %+v", got.Tables)
	// Every table's pruned rows are a prefix of its rows.
	var holes int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox_pruned p JOIN oml.outbox o
ON o.tenant_id = p.tenant_id AND o.target = p.target AND o.seq <= p.through_seq
WHERE NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.outbox_seq = o.seq)`).Scan(&holes))
	require.Zero(t, holes, "below a table's prune mark only dead-lettered rows are left")

	// journal.CheckFold accepts the pruned prefix, and still notices a row
	// missing above a table's mark (deleted behind prune's back).
	require.NoError(t, journal.CheckFold(ctx, b.Pool, b.Tenants[0]))
	_, err = b.Pool.Exec(ctx, `DELETE FROM oml.outbox WHERE seq = (SELECT max(seq) FROM oml.outbox
WHERE tenant_id = $1 AND target = 'bronze.events' AND seq > $2)`, b.Tenants[0], mid)
	require.NoError(t, err)
	require.ErrorContains(t, journal.CheckFold(ctx, b.Pool, b.Tenants[0]), "lacks above its prune mark")
}

// Prune refuses, and deletes nothing, when the lake cannot be read or
// belongs to another history.
func TestPrune_RefusesWhenTheLakeIsUnreadableOrNotThisDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 5, Seed: 3})
	lake := store.NewMem()
	b.DrainAll(t, b.drainer(t, lake, nil))
	before := b.outboxRows(t)

	// Another deployment's lake.
	other := setup(t, 1)
	other.load(t, workload.Config{Claims: 5, Seed: 4})
	otherLake := store.NewMem()
	other.DrainAll(t, other.drainer(t, otherLake, nil))
	_, err := outboxprune.Run(ctx, outboxprune.Options{DB: b.Pool, Lake: otherLake})
	var refused *outboxprune.RefusedError
	require.ErrorAs(t, err, &refused)

	// The database behind the lake (its outbox sequence below the lake's
	// txn versions, as after a failover that lost a tail).
	var last int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT last_value FROM oml.outbox_seq_seq`).Scan(&last))
	_, err = b.Pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last-3)
	require.NoError(t, err)
	_, err = outboxprune.Run(ctx, outboxprune.Options{DB: b.Pool, Lake: lake})
	require.ErrorAs(t, err, &refused)
	require.Equal(t, lakewriter.ContinuityAhead, refused.C.State)
	require.Contains(t, err.Error(), "ahead of the database")
	_, err = b.Pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last)
	require.NoError(t, err)

	// A table whose log is corrupt.
	key := tables.TableKey{Tenant: b.Tenants[0], Kind: tables.Bronze}
	objs, err := lake.List(ctx, key.Path()+"/_delta_log/", "")
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, lake.Put(ctx, o.Key, strings.NewReader("{not json"), 9))
	}
	_, err = outboxprune.Run(ctx, outboxprune.Options{DB: b.Pool, Lake: lake})
	var lakeErr *outboxprune.LakeError
	require.ErrorAs(t, err, &lakeErr)
	_, err = outboxprune.Run(ctx, outboxprune.Options{DB: b.Pool})
	require.ErrorAs(t, err, &lakeErr, "no lake at all")
	require.Equal(t, before, b.outboxRows(t))
}

// A prune racing a running drain while the workload appends loses
// nothing: at the end the lake equals the journal fold (reconcile), and a
// table rebuilt after all that is exact too.
func TestPrune_RacingARunningDrainAndTheWorkloadLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	lake := store.NewMem()
	d := b.drainer(t, lake, func(o *lakewriter.Options) { o.MaxWait = time.Millisecond })
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("drain: %v", err)
		}
	}()
	done := make(chan struct{})
	var pruned atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			res, err := outboxprune.Run(ctx, outboxprune.Options{DB: b.Pool, Lake: lake, BatchRows: 7})
			if err != nil {
				t.Errorf("prune: %v", err)
				return
			}
			pruned.Add(res.Rows)
		}
	}()
	for round := 0; round < 4; round++ {
		b.load(t, workload.Config{Claims: 12, Seed: 31, FirstRound: round, Batch: 3})
	}
	// On a loaded machine the workload can end before the drain applied
	// anything a prune may delete: the prunes go on beside the drain
	// until one has.
	for deadline := time.Now().Add(time.Minute); pruned.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	stop()
	wg.Wait()
	b.DrainAll(t, b.drainer(t, lake, nil))
	require.Positive(t, pruned.Load(), "the prunes ran while the drain did")
	b.prune(t, lake, false)
	b.reconcileClean(t, lake)
	require.Zero(t, b.outboxRows(t), "everything applied, nothing dead-lettered: the outbox is empty")

	key := tables.TableKey{Tenant: b.Tenants[1], Kind: tables.Silver}
	want := tableRows(t, lake, key, true)
	deleteTable(t, lake, key)
	b.DrainAll(t, b.drainer(t, lake, nil))
	_, err := b.drainer(t, lake, nil).DrainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, want, tableRows(t, lake, key, true))
	b.reconcileClean(t, lake)
}

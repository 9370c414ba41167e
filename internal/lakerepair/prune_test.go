package lakerepair_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/testkit"
)

// pruneAll runs `oml outbox prune` with no retention: every row every
// table has applied is deleted. It requires that rows of each tenant's
// tables were pruned, so what a repair puts back must be re-derived.
func pruneAll(t *testing.T, e *env, tenants ...uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	res, err := outboxprune.Run(ctx, outboxprune.Options{DB: e.pool, Lake: e.lake, BatchRows: 500})
	require.NoError(t, err)
	require.Positive(t, res.Rows, "prune deleted rows")
	for _, tn := range tenants {
		for _, target := range []string{"bronze.events", "silver.claims"} {
			var mark int64
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT through_seq FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = $2`, tn, target).Scan(&mark))
			require.Positive(t, mark, "tenant %s %s was pruned", tn, target)
		}
	}
}

// TestRepair_AfterOutboxPrune_EveryPutBackClassReDerivedFromTheJournal:
// the outbox is pruned to nothing the lake has applied, then every row
// class is planted (a missing silver row, digest and state mismatches, a
// duplicate, a breach, a forged and a duplicate bronze row, lost bronze
// data files, a deleted silver table). The rows the repair must put back
// are no longer in the outbox: it re-derives them from the journal, and
// every table read file by file equals the fold; reconcile, chain verify
// and doctor are clean; a second repair does nothing. (The forged bronze
// row's seq, above the journal head, holds tenant 1 for the fork check
// until it is removed, and with its outbox rows pruned its deleted silver
// table is then left to the drain's catch-up from 0: hence the drain before
// the checks; the rebuild by the repair itself is the next test.)
func TestRepair_AfterOutboxPrune_EveryPutBackClassReDerivedFromTheJournal(t *testing.T) {
	t.Parallel()
	lake := testkit.FileLake(t)
	e, t0, t1 := newRowsEnv(t, lake)
	pruneAll(t, e, t0, t1)
	runPlantedRows(t, e, t0, t1, false)
}

// TestRepair_AfterOutboxPrune_PlantedRowClasses_S3Lake is the same on S3
// (versitygw).
func TestRepair_AfterOutboxPrune_PlantedRowClasses_S3Lake(t *testing.T) {
	t.Parallel()
	e, t0, t1 := newRowsEnv(t, s3test.NewBucket(t, nil).Store)
	pruneAll(t, e, t0, t1)
	runPlantedRows(t, e, t0, t1, false)
}

// TestRepair_AfterOutboxPrune_DeletedTablesRebuiltFromTheJournal: after a
// prune, a tenant's bronze and silver tables are deleted; the repair
// rebuilds both at the frontier from rows re-derived from the journal
// (their lake rows carry no outbox seq: it was pruned), and the repair
// alone makes every check clean; the drain then has only the repair's own
// events to apply.
func TestRepair_AfterOutboxPrune_DeletedTablesRebuiltFromTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	e, t0, t1 := newRowsEnv(t, lake)
	pruneAll(t, e, t0, t1)
	var left int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE tenant_id = $1`, t0).Scan(&left))
	require.Zero(t, left, "every row of the tenant was pruned")
	for _, k := range []tables.Kind{tables.Bronze, tables.Silver} {
		st := tableStore(t, e.lake, t0, k)
		objs, err := st.List(ctx, "", "")
		require.NoError(t, err)
		for _, o := range objs {
			require.NoError(t, st.Delete(ctx, o.Key))
		}
	}
	res := e.repairAll(t)
	require.Empty(t, res.Plan.Pending, "the repair rebuilt the tables itself")
	rebuilt := 0
	for _, r := range res.Repaired {
		if r.Action == lakerepair.ActionRebuild {
			rebuilt++
			require.Equal(t, e.lastSeq(t)-int64(len(res.Journal)), r.TxnVersion, "%s is rebuilt at the frontier", r.Path)
		}
	}
	require.Equal(t, 2, rebuilt)
	requireChecksGreen(t, e)
	for _, k := range []tables.Kind{tables.Bronze, tables.Silver} {
		rows := readTable(t, e.lake, tables.TableKey{Tenant: t0, Kind: k}, []string{"outbox_seq"})
		require.NotEmpty(t, rows)
		for _, r := range rows {
			require.Nil(t, r[0], "%s: a re-derived row has no outbox seq", k)
		}
	}
	e.drain(t)
	requireLakeEqualsJournal(t, e)
	e.requireNoTableToRepair(t)
}

// restoreOldCopy is a table restored from an old backup: the table's
// directory is replaced by the copy taken earlier.
func restoreOldCopy(t *testing.T, lakeDir, backup string, key tables.TableKey) {
	t.Helper()
	dir := filepath.Join(lakeDir, filepath.FromSlash(key.Path()))
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.CopyFS(dir, os.DirFS(backup)))
}

// TestDrain_TableRestoredFromABackupBelowItsPruneMark_HeldThenRepairCatchesItUp:
// a tenant's bronze table is copied, the tenant writes more and is drained,
// the outbox is pruned (the table's prune mark passes the copy's txn
// version), and the old copy is restored. The rows between the copy's txn
// version and the mark are no longer in the outbox: a drain must not skip
// them (nor move the table's txn version past them) — it holds the table,
// naming the repair, and exits with the hold. `oml lake repair` catches the
// table up from rows re-derived from the journal, to the frontier; the
// drain then goes on, and the lake equals the journal exactly.
func TestDrain_TableRestoredFromABackupBelowItsPruneMark_HeldThenRepairCatchesItUp(t *testing.T) {
	t.Parallel()
	t.Run("WritesSince", func(t *testing.T) { t.Parallel(); runBelowPruneMark(t, true) })
	t.Run("NothingWrittenSince", func(t *testing.T) { t.Parallel(); runBelowPruneMark(t, false) })
}

func runBelowPruneMark(t *testing.T, writeSince bool) {
	ctx := context.Background()
	lakeDir := t.TempDir()
	lake, err := store.NewFile(lakeDir)
	require.NoError(t, err)
	e, t0, t1 := newRowsEnv(t, lake)
	key := tables.TableKey{Tenant: t0, Kind: tables.Bronze}
	backup := filepath.Join(t.TempDir(), "backup")
	require.NoError(t, os.CopyFS(backup, os.DirFS(filepath.Join(lakeDir, filepath.FromSlash(key.Path())))))
	old, err := delta.Load(ctx, tableStore(t, lake, t0, tables.Bronze))
	require.NoError(t, err)
	oldTxn, _ := old.TxnVersion(tables.AppID)

	e.load(t, []uuid.UUID{t0, t1}, 21)
	e.drain(t)
	pruneAll(t, e, t0, t1)
	restoreOldCopy(t, lakeDir, backup, key)
	var mark int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT through_seq FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = 'bronze.events'`, t0).Scan(&mark))
	require.Less(t, oldTxn, mark, "the restored table is below its prune mark")

	if writeSince {
		// The application writes on: the next batch touches the table.
		e.load(t, []uuid.UUID{t0, t1}, 22)
	}
	d, err := lakewriter.New(e.drainOpts())
	require.NoError(t, err)
	for i := 0; i < 20 && (i == 0 || d.Frontier() < e.lastSeq(t)); i++ {
		_, err := d.DrainOnce(ctx)
		require.NoError(t, err)
	}
	held := d.HeldTables()
	require.Len(t, held, 1, "the table below its prune mark is held")
	require.Equal(t, key.Path(), held[0].Table)
	require.Contains(t, held[0].Reason, "prune mark")
	require.Contains(t, held[0].Reason, "oml lake repair")
	after, err := delta.Load(ctx, tableStore(t, lake, t0, tables.Bronze))
	require.NoError(t, err)
	txn, _ := after.TxnVersion(tables.AppID)
	require.Equal(t, oldTxn, txn, "nothing was committed past the rows the drain cannot read")

	res := e.repairAll(t)
	var caught bool
	for _, tp := range res.Plan.Tables {
		if tp.Path == key.Path() {
			caught = tp.Classes[string(lakerepair.BelowPruneMark)] == 1
		}
	}
	require.True(t, caught, "the plan names the class: %+v", res.Plan.Tables)
	e.drain(t)
	requireLakeEqualsJournal(t, e)
	e.requireNoTableToRepair(t)
}

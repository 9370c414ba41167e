package maintain_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
)

// Run loads a table's snapshot once, to measure it, and commits its steps
// on it through one writer (runTable). These tests land another writer's
// commit between the measurement and the steps, and between the rewrite
// and the checkpoint, and check that the reused snapshot never hides it.

// smallFileTable is a table of n commits of one small file (one row) each,
// with no checkpoint, and a second writer on it (the "lake writer").
func smallFileTable(t *testing.T, n int) (maintain.Table, *delta.Writer) {
	t.Helper()
	st := testkit.FileLake(t)
	schema := &delta.StructType{Fields: []delta.StructField{
		delta.Field("seq", delta.Prim(delta.TypeLong), true),
		delta.Field("payload", delta.Prim(delta.TypeString), true),
	}}
	w, err := delta.NewTable(st, delta.TableSpec{Schema: schema}, delta.Options{})
	require.NoError(t, err)
	for i := int64(1); i <= int64(n); i++ {
		appendRow(t, w, i, "event")
	}
	return maintain.Table{Key: tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, Store: st}, w
}

// appendRow commits one file holding (seq, payload) with w, as the lake
// writer does (a txn at seq).
func appendRow(t *testing.T, w *delta.Writer, seq int64, payload string) {
	t.Helper()
	ctx := context.Background()
	add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{seq, payload}})
	require.NoError(t, err)
	_, err = w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: []*delta.Add{add}, Txn: &delta.Txn{AppID: tables.AppID, Version: seq}})
	require.NoError(t, err)
}

func runOne(t *testing.T, tab maintain.Table, p maintain.Policy) maintain.Report {
	t.Helper()
	reps, err := maintain.Run(context.Background(), []maintain.Table{tab}, maintain.RunOptions{Policy: p})
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Empty(t, reps[0].Error)
	return reps[0]
}

// requireCheckpointedAtLatest requires that the table's newest checkpoint
// is of its latest version and that a snapshot read from it alone holds
// want live files.
func requireCheckpointedAtLatest(t *testing.T, st store.Store, want int) {
	t.Helper()
	snap, err := delta.Load(context.Background(), st)
	require.NoError(t, err)
	require.Equal(t, snap.Version(), snap.CheckpointVersion(), "the checkpoint is of the latest version")
	require.Equal(t, want, snap.NumFiles())
}

// The lake writer appends between the measurement and the compaction: the
// compaction (planned on the measured snapshot) loses the put-if-absent,
// catches up, finds its files still live and commits on top; the
// checkpoint covers the append too.
func TestRun_AppendBetweenMeasureAndOptimize_RebasedAndCheckpointed(t *testing.T) {
	// Not parallel: the hooks are package-global.
	tab, other := smallFileTable(t, 20)
	defer maintain.SetBeforeSteps(func(maintain.Table) { appendRow(t, other, 21, "late") })()
	rep := runOne(t, tab, maintain.Policy{CheckpointInterval: 10})
	require.Equal(t, []maintain.Task{maintain.TaskOptimize, maintain.TaskCheckpoint}, tasks(rep.Plan))
	require.EqualValues(t, 19, rep.Version, "measured before the append")
	require.Zero(t, rep.Compacted.Restarts)
	require.Equal(t, 20, rep.Compacted.FilesRemoved, "the measured files, not the late one")
	require.EqualValues(t, 21, rep.Compacted.Version, "committed after the append (v20)")
	require.EqualValues(t, 21, rep.Checkpoint.Version)
	requireCheckpointedAtLatest(t, tab.Store, 2)
	require.Len(t, readRows(t, tab.Store), 21)
	requireLogSound(t, "bronze", readLog(t, tab.Store))
}

// A MERGE removes one of the measured files between the measurement and
// the compaction: publishing would bring back the row it replaced, so the
// compaction starts again from the table as it is, and the MERGE's change
// survives.
func TestRun_MergeBetweenMeasureAndOptimize_CompactionRedone(t *testing.T) {
	ctx := context.Background()
	tab, other := smallFileTable(t, 20)
	defer maintain.SetBeforeSteps(func(maintain.Table) {
		f := other.Snapshot().Files()[0]
		key, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		var rows []pq.Row
		require.NoError(t, other.Snapshot().Scan(ctx, tab.Store, delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, b []pq.Row) error {
			rows = append(rows, b...)
			return nil
		}))
		for _, r := range rows {
			r[1] = "merged"
		}
		add, err := other.WriteFile(ctx, map[string]*string{}, rows)
		require.NoError(t, err)
		rm, err := other.Remove(key)
		require.NoError(t, err)
		_, err = other.Commit(ctx, delta.Commit{Operation: "MERGE", Adds: []*delta.Add{add}, Removes: []*delta.Remove{rm}})
		require.NoError(t, err)
	})()
	rep := runOne(t, tab, maintain.Policy{CheckpointInterval: 10})
	require.Equal(t, 1, rep.Compacted.Restarts, "the measured snapshot's compaction was abandoned")
	require.EqualValues(t, 21, rep.Compacted.Version)
	require.EqualValues(t, 21, rep.Checkpoint.Version)
	requireCheckpointedAtLatest(t, tab.Store, 1)
	rows := readRows(t, tab.Store)
	require.Len(t, rows, 20)
	merged := 0
	for _, r := range rows {
		if r[1] == "merged" {
			merged++
		}
	}
	require.Equal(t, 1, merged, "the MERGE's change survived the compaction")
	requireLogSound(t, "bronze", readLog(t, tab.Store))
}

// The lake writer appends after the compaction, right before the
// checkpoint: the writer the steps share is behind the table then, and the
// checkpoint must still be of the latest version (the writer catches up
// first), not of the compaction's.
func TestRun_AppendBeforeCheckpoint_CheckpointIsOfTheLatestVersion(t *testing.T) {
	tab, other := smallFileTable(t, 20)
	defer maintain.SetBeforeCheckpoint(func(maintain.Table) {
		// other is behind the compaction: catch it up, as the lake writer
		// would after losing the race for the version.
		_, err := other.Refresh(context.Background())
		require.NoError(t, err)
		appendRow(t, other, 21, "late")
	})()
	rep := runOne(t, tab, maintain.Policy{CheckpointInterval: 10})
	require.EqualValues(t, 20, rep.Compacted.Version)
	require.EqualValues(t, 21, rep.Checkpoint.Version, "the checkpoint covers the append")
	requireCheckpointedAtLatest(t, tab.Store, 2)
	require.Len(t, readRows(t, tab.Store), 21)
}

// Only a checkpoint is due (too few small files to compact): it is written
// from the measured snapshot's writer, caught up with an append that
// landed after the measurement.
func TestRun_CheckpointOnly_AppendAfterMeasure_Covered(t *testing.T) {
	tab, other := smallFileTable(t, 12)
	defer maintain.SetBeforeSteps(func(maintain.Table) { appendRow(t, other, 13, "late") })()
	rep := runOne(t, tab, maintain.Policy{CheckpointInterval: 10})
	require.Equal(t, []maintain.Task{maintain.TaskCheckpoint}, tasks(rep.Plan))
	require.EqualValues(t, 11, rep.Version)
	require.EqualValues(t, 12, rep.Checkpoint.Version)
	requireCheckpointedAtLatest(t, tab.Store, 13)
}

// A lean snapshot (the lake writer's bronze and gold) holds only the files
// since its base checkpoint: measuring it would undercount the small
// files, and a writer of removes must not stand on it. Both refuse it.
func TestMeasure_LeanSnapshot_Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tab, w := smallFileTable(t, 20)
	_, err := w.Checkpoint(ctx)
	require.NoError(t, err)
	appendRow(t, w, 21, "after")
	lw, err := delta.OpenWriter(ctx, tab.Store, delta.Options{Lean: true})
	require.NoError(t, err)
	lean := lw.Snapshot()
	require.True(t, lean.Lean())
	require.Equal(t, 1, lean.NumFiles(), "a lean snapshot lists only the files since its checkpoint")

	_, err = maintain.MeasureSnapshot(tab, lean, nil, maintain.MeasureOptions{})
	require.ErrorIs(t, err, maintain.ErrLeanSnapshot)
	_, err = delta.WriterOn(tab.Store, lean, delta.Options{})
	require.Error(t, err)

	// The full snapshot Run measures counts every file.
	m, err := maintain.Measure(ctx, tab, maintain.MeasureOptions{})
	require.NoError(t, err)
	require.Equal(t, 21, m.LiveFiles)
	require.Equal(t, 21, m.SmallFiles)
}

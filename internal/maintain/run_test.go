package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
)

// A table the lake writer left with many commits, many small files and no
// checkpoint: maintain measures it, plans optimize + checkpoint, does them,
// and the next run finds nothing due. A month later, the log behind the
// checkpoint is cleaned and the table still reads.
func TestRun_DoesWhatIsDueThenNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testkit.FileLake(t)
	schema := &delta.StructType{Fields: []delta.StructField{
		delta.Field("seq", delta.Prim(delta.TypeLong), true),
		delta.Field("payload", delta.Prim(delta.TypeString), true),
	}}
	w, err := delta.CreateTable(ctx, st, delta.TableSpec{Schema: schema}, delta.Options{})
	require.NoError(t, err)
	for i := int64(1); i <= 120; i++ {
		add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{{i, "event"}})
		require.NoError(t, err)
		_, err = w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: []*delta.Add{add}, Txn: &delta.Txn{AppID: tables.AppID, Version: i}})
		require.NoError(t, err)
	}
	tab := maintain.Table{Key: tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, Store: st}

	reps, err := maintain.Run(ctx, []maintain.Table{tab}, maintain.RunOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, []maintain.Task{maintain.TaskOptimize, maintain.TaskCheckpoint}, tasks(reps[0].Plan))
	require.EqualValues(t, 121, reps[0].CommitsSinceCheckpoint)
	require.Equal(t, 120, reps[0].SmallFiles)
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	require.EqualValues(t, 120, snap.Version(), "a dry run changes nothing")

	reps, err = maintain.Run(ctx, []maintain.Table{tab}, maintain.RunOptions{})
	require.NoError(t, err)
	require.Empty(t, reps[0].Error)
	require.Equal(t, 120, reps[0].Compacted.FilesRemoved)
	require.EqualValues(t, 121, reps[0].Checkpoint.Version)
	v, ok := snap.TxnVersion(tables.AppID)
	require.True(t, ok)
	after, err := delta.Load(ctx, st)
	require.NoError(t, err)
	got, _ := after.TxnVersion(tables.AppID)
	require.Equal(t, v, got, "maintenance never moves the lake writer's txn version")
	require.Len(t, readRows(t, st), 120)

	reps, err = maintain.Run(ctx, []maintain.Table{tab}, maintain.RunOptions{})
	require.NoError(t, err)
	require.Empty(t, reps[0].Plan, "nothing is due right after maintenance")

	// 31 days on: the 120 removed files have expired (vacuum), and the
	// commits before the checkpoint are past the log retention.
	later := func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	reps, err = maintain.Run(ctx, []maintain.Table{tab}, maintain.RunOptions{Now: later})
	require.NoError(t, err)
	require.Equal(t, []maintain.Task{maintain.TaskVacuum, maintain.TaskCleanupLog}, tasks(reps[0].Plan))
	require.Equal(t, 120, reps[0].Vacuumed.Deleted)
	require.Equal(t, 121, *reps[0].LogCleaned)
	require.Len(t, readRows(t, st), 120, "the table reads from the retained checkpoint")
}

func tasks(steps []maintain.Step) []maintain.Task {
	var out []maintain.Task
	for _, s := range steps {
		out = append(out, s.Task)
	}
	return out
}

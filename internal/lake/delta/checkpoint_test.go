package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

func jsonOnly() LoadOptions { return LoadOptions{ignoreCheckpoints: true} }

func jsonOnlyAt(v int64) LoadOptions { return LoadOptions{Version: &v, ignoreCheckpoints: true} }

// TestCheckpointEqualsJSONReplay: at every version, the snapshot built from
// the newest checkpoint plus later commits equals replaying JSON only.
func TestCheckpointEqualsJSONReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st, "day")
	checkpoints := map[int64]bool{}
	for i := 1; i <= 25; i++ {
		c := Commit{Operation: "WRITE", Adds: []*Add{fakeAdd(fmt.Sprintf("2026-01-%02d", 1+i%4))},
			Txn: &Txn{AppID: fmt.Sprintf("app-%d", i%3), Version: int64(i)}}
		if i%5 == 0 {
			files := w.Snapshot().Files()
			key, err := DecodePath(files[0].Path)
			require.NoError(t, err)
			remove := w.Remove
			if i%10 == 0 {
				remove = w.RemoveCompacted
			}
			rm, err := remove(key)
			require.NoError(t, err)
			c.Operation, c.Removes = "MERGE", []*Remove{rm}
		}
		_, err := w.Commit(ctx, c)
		require.NoError(t, err)
		if i == 7 || i == 16 || i == 17 {
			res, err := w.Checkpoint(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(i), res.Version)
			require.Equal(t, int64(3), res.Txns, "every txn is in the checkpoint")
			checkpoints[int64(i)] = true
		}
	}
	for v := int64(0); v <= 25; v++ {
		withCP, err := Load(ctx, st, AtVersion(v))
		require.NoError(t, err)
		replay, err := Load(ctx, st, jsonOnlyAt(v))
		require.NoError(t, err)
		require.Equal(t, stateOf(replay), stateOf(withCP), "version %d", v)
		switch {
		case v >= 17:
			require.Equal(t, int64(17), withCP.CheckpointVersion())
		case v >= 16:
			require.Equal(t, int64(16), withCP.CheckpointVersion())
		case v >= 7:
			require.Equal(t, int64(7), withCP.CheckpointVersion())
		default:
			require.Equal(t, int64(-1), withCP.CheckpointVersion())
		}
		for app, txn := range withCP.Txns() {
			require.NotNil(t, txn.LastUpdated, "txn %s keeps lastUpdated", app)
		}
	}
	hint, ok, err := readLastCheckpoint(ctx, st)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(17), hint.Version)
	snap17, err := Load(ctx, st, AtVersion(17))
	require.NoError(t, err)
	require.Equal(t, int64(snap17.NumFiles()), hint.NumOfAddFiles)
	require.Equal(t, int64(2+3+snap17.NumFiles()+snap17.NumTombstones()), hint.Size)
	info, err := st.Stat(ctx, CheckpointKey(17))
	require.NoError(t, err)
	require.Equal(t, info.Size, hint.SizeInBytes)
}

func TestCheckpointDropsExpiredTombstonesKeepsEveryTxn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	w, err := CreateTable(ctx, st, TableSpec{Schema: testSchema(), Configuration: map[string]string{"delta.deletedFileRetentionDuration": "interval 2 days"}}, Options{Now: clock})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd(""), fakeAdd("")}, Txn: &Txn{AppID: "old", Version: 1}})
	require.NoError(t, err)
	files := w.Snapshot().Files()
	k0, _ := DecodePath(files[0].Path)
	rm, err := w.Remove(k0)
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
	require.NoError(t, err)
	now = now.Add(3 * 24 * time.Hour) // the first remove is now expired
	k1, _ := DecodePath(files[1].Path)
	rm, err = w.Remove(k1)
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}, Txn: &Txn{AppID: "new", Version: 5}})
	require.NoError(t, err)
	res, err := w.Checkpoint(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Tombstones)
	require.Equal(t, int64(1), res.ExpiredFiles)
	require.Equal(t, int64(2), res.Txns)
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1, snap.NumTombstones())
	require.Equal(t, map[string]int64{"old": 1, "new": 5}, stateOf(snap).Txns)
	// The writer forgot the expired tombstone too: its snapshot is what a
	// reload through the checkpoint gives.
	require.Equal(t, stateOf(snap), stateOf(w.Snapshot()))
}

func TestCheckpointPolicyCountsCommitsSinceLastCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w, err := CreateTable(ctx, st, TableSpec{Schema: testSchema()}, Options{CheckpointInterval: 3})
	require.NoError(t, err)
	var wrote []int64
	for i := 1; i <= 10; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
		require.NoError(t, err)
		if i == 4 {
			continue // a "crash" between commit and checkpoint: no checkpoint attempt here
		}
		did, res, err := w.MaybeCheckpoint(ctx)
		require.NoError(t, err)
		if did {
			wrote = append(wrote, res.Version)
		}
	}
	// v0..v2 -> due at 2 (3 commits since -1); after the skipped attempt at 4
	// the checkpoint still happens at 5, not at the next multiple of 3.
	require.Equal(t, []int64{2, 5, 8}, wrote)
	// A reopened writer learns the last checkpoint from the table.
	w2, err := OpenWriter(ctx, st, Options{CheckpointInterval: 3})
	require.NoError(t, err)
	require.Equal(t, int64(2), w2.CommitsSinceCheckpoint())
}

// TestGoldenCheckpointRoundTrip: oml checkpoints a copy of every readable
// corpus table it may write; the snapshot read through that checkpoint is
// the one read before.
func TestGoldenCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		if e.Expect != "read" || !e.MinimalWriterMayCommit {
			continue
		}
		t.Run(e.Dir, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := store.NewFile(copyTable(t, filepath.Join(dir, e.Dir)))
			require.NoError(t, err)
			before, err := Load(ctx, st)
			require.NoError(t, err)
			// A clock at the epoch expires nothing, so tombstones survive too.
			_, err = WriteCheckpoint(ctx, st, before, time.Unix(0, 0))
			require.NoError(t, err)
			after, err := Load(ctx, st)
			require.NoError(t, err)
			require.Equal(t, before.Version(), after.CheckpointVersion())
			require.Equal(t, stateOf(before), stateOf(after))
			b, err := st.Get(ctx, LastCheckpointKey)
			require.NoError(t, err)
			var hint map[string]any
			require.NoError(t, json.Unmarshal(b, &hint))
			require.EqualValues(t, before.Version(), hint["version"])
		})
	}
}

// TestCorruptCheckpointFallsBack: a checkpoint that cannot be decoded is
// skipped for an older one (or a replay from 0); the snapshot is the same.
func TestCorruptCheckpointFallsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st)
	for i := 1; i <= 10; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: int64(i)}})
		require.NoError(t, err)
		if i == 4 || i == 8 {
			_, err := w.Checkpoint(ctx)
			require.NoError(t, err)
		}
	}
	want, err := Load(ctx, st, jsonOnly())
	require.NoError(t, err)
	torn := []byte("PAR1 this is not a parquet file")
	require.NoError(t, st.Put(ctx, CheckpointKey(8), bytes.NewReader(torn), int64(len(torn))))
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(4), snap.CheckpointVersion())
	require.Equal(t, stateOf(want), stateOf(snap))

	require.NoError(t, st.Put(ctx, CheckpointKey(4), bytes.NewReader(torn), int64(len(torn))))
	snap, err = Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(-1), snap.CheckpointVersion())
	require.Equal(t, stateOf(want), stateOf(snap))

	// Without the commits behind it, a corrupt checkpoint is an error that
	// names it, never a partial snapshot.
	for v := int64(0); v <= 8; v++ {
		require.NoError(t, st.Delete(ctx, CommitKey(v)))
	}
	snap, err = Load(ctx, st)
	require.Nil(t, snap)
	require.ErrorIs(t, err, ErrCorruptLog)
	require.Contains(t, err.Error(), "checkpoint at version 8")
}

// TestCheckpointRefusedOnTablesOmlCannotWrite: checkpointing, log cleanup
// and vacuum are writes; a readable table that the writer gate refuses
// (here: change data feed) is left alone.
func TestCheckpointRefusedOnTablesOmlCannotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		if e.Expect != "read" || e.MinimalWriterMayCommit {
			continue
		}
		st, err := store.NewFile(copyTable(t, filepath.Join(dir, e.Dir)))
		require.NoError(t, err)
		_, err = Checkpoint(ctx, st)
		require.ErrorIs(t, err, ErrUnsupported, e.Dir)
		_, err = CleanupLog(ctx, st, time.Now().Add(365*24*time.Hour))
		require.ErrorIs(t, err, ErrUnsupported, e.Dir)
		_, err = Vacuum(ctx, st, VacuumOptions{DryRun: true})
		require.ErrorIs(t, err, ErrUnsupported, e.Dir)
	}
}

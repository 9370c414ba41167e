package delta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
)

// TestLeanWriter_CheckpointsEqualAFullReplay: an append-only writer that
// keeps no file list (Options.Lean) commits many times with checkpoints in
// between, while a second, full writer removes files — some from before the
// lean writer's last checkpoint, some after — and tombstones expire. Every
// checkpoint the lean writer streams must give exactly the snapshot a JSON
// replay gives, and its memory holds only the files since its last
// checkpoint.
func TestLeanWriter_CheckpointsEqualAFullReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	now := time.Now()
	clock := func() time.Time { return now }
	full := newTestTable(t, st)
	lean, err := OpenWriter(ctx, st, Options{Lean: true, CheckpointInterval: 3, Now: clock})
	require.NoError(t, err)
	require.True(t, lean.Snapshot().Lean())

	var added []string // decoded paths, in order
	checkpoints := 0
	for i := 0; i < 40; i++ {
		a := fakeAdd("")
		key, err := DecodePath(a.Path)
		require.NoError(t, err)
		for {
			_, err = lean.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{a}, Txn: &Txn{AppID: "oml-lakewriter", Version: int64(i + 1)}})
			var ce *ConflictError
			if errors.As(err, &ce) {
				continue // caught up with the full writer; retry at the next version
			}
			require.NoError(t, err)
			break
		}
		added = append(added, key)
		if done, _, err := lean.MaybeCheckpoint(ctx); err == nil && done {
			checkpoints++
			require.Empty(t, lean.Snapshot().files, "a lean snapshot forgets what its checkpoint holds")
			// The checkpoint equals a JSON replay at its version.
			v := lean.Version()
			got, err := Load(ctx, st, AtVersion(v))
			require.NoError(t, err)
			require.Equal(t, v, got.CheckpointVersion(), "the new checkpoint is the one read")
			want, err := Load(ctx, st, jsonOnlyAt(v))
			require.NoError(t, err)
			require.Equal(t, stateOf(want), stateOf(got), "checkpoint at version %d", v)
			requireCheckpointPathsUnique(t, st, v)
		} else {
			require.NoError(t, err)
		}
		// Every fifth round the full writer removes the oldest live file
		// (often one only the lean writer's base checkpoint holds).
		if i%5 == 4 {
			_, err := full.catchUp(ctx)
			require.NoError(t, err)
			for _, k := range added {
				if _, live := full.Snapshot().File(k); live {
					rm, err := full.Remove(k)
					require.NoError(t, err)
					_, err = full.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
					require.NoError(t, err)
					break
				}
			}
		}
	}
	require.Greater(t, checkpoints, 5)

	// A reopened lean writer stands on the newest checkpoint and goes on.
	again, err := OpenWriter(ctx, st, Options{Lean: true, CheckpointInterval: 1, Now: clock})
	require.NoError(t, err)
	_, err = again.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	_, err = again.Checkpoint(ctx)
	require.NoError(t, err)
	got, err := Load(ctx, st)
	require.NoError(t, err)
	want, err := Load(ctx, st, jsonOnly())
	require.NoError(t, err)
	require.Equal(t, stateOf(want), stateOf(got))

	// Lean writers are append-only.
	rm := &Remove{Path: EncodePath(added[len(added)-1]), DataChange: true}
	_, err = again.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
	require.ErrorContains(t, err, "lean")
}

// requireCheckpointPathsUnique: a checkpoint names each path at most once,
// as a live add or as a tombstone, never both (readers that reconcile a
// checkpoint without regard to row order depend on it).
func requireCheckpointPathsUnique(t *testing.T, st store.Store, v int64) {
	t.Helper()
	seen := map[string]string{}
	err := readCheckpoint(context.Background(), st, &checkpointRef{version: v, keys: []string{CheckpointKey(v)}}, func(a *Action) error {
		var path, kind string
		switch {
		case a.Add != nil:
			path, kind = a.Add.Path, "add"
		case a.Remove != nil:
			path, kind = a.Remove.Path, "remove"
		default:
			return nil
		}
		if prev, dup := seen[path]; dup {
			t.Errorf("checkpoint %d names %s twice (%s and %s)", v, path, prev, kind)
		}
		seen[path] = kind
		return nil
	})
	require.NoError(t, err)
}

package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

// commitSequence is a stand-in for the Delta writer: a data file, then the
// commit, then a hint.
func commitSequence(ctx context.Context, s store.Store, v int) error {
	if err := s.Put(ctx, fmt.Sprintf("part-%d.parquet", v), bytes.NewReader([]byte("rows")), 4); err != nil {
		return err
	}
	if err := s.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", v), []byte(fmt.Sprintf("commit %d", v))); err != nil {
		return err
	}
	return s.Put(ctx, "_delta_log/_last_checkpoint", bytes.NewReader([]byte(fmt.Sprint(v))), -1)
}

func TestMemCrashAtEveryWriteKeepsExactlyTheAppliedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for crashAt := 0; crashAt < 3; crashAt++ {
		for _, apply := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d/applied=%v", crashAt, apply), func(t *testing.T) {
				t.Parallel()
				m := store.NewMem()
				require.NoError(t, commitSequence(ctx, m, 0))
				before := m.Keys()

				m.CrashAt(crashAt, apply)
				err := commitSequence(ctx, m, 1)
				require.ErrorIs(t, err, store.ErrCrashed)
				require.True(t, m.Crashed())
				// The dead process can do nothing more.
				_, err = m.Get(ctx, "part-0.parquet")
				require.ErrorIs(t, err, store.ErrCrashed)
				require.ErrorIs(t, m.PutIfAbsent(ctx, "x", nil), store.ErrCrashed)

				restarted := m.CrashClone()
				writes := []string{"part-1.parquet", "_delta_log/00000000000000000001.json", "_delta_log/_last_checkpoint"}
				want := map[string]bool{}
				for _, k := range before {
					want[k] = true
				}
				for i, k := range writes {
					if i < crashAt || (i == crashAt && apply) {
						want[k] = true
					}
				}
				var wantKeys []string
				for _, k := range []string{"_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json", "_delta_log/_last_checkpoint", "part-0.parquet", "part-1.parquet"} {
					if want[k] {
						wantKeys = append(wantKeys, k)
					}
				}
				require.Equal(t, wantKeys, restarted.Keys())
				// Whatever is there is whole.
				if want["_delta_log/00000000000000000001.json"] {
					got, err := restarted.Get(ctx, "_delta_log/00000000000000000001.json")
					require.NoError(t, err)
					require.Equal(t, "commit 1", string(got))
				}
				// The restarted store is live and keeps put-if-absent.
				require.False(t, restarted.Crashed())
				require.ErrorIs(t, restarted.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", nil), store.ErrExists)
			})
		}
	}
}

func TestMemCrashWhenTargetsANamedCrashPoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := store.NewMem()
	// Crash right after the commit file lands, before the caller hears of it.
	m.CrashWhen(func(op store.OpKind, key string) (bool, bool) {
		return op == store.OpPutIfAbsent && key == "_delta_log/00000000000000000003.json", true
	})
	var err error
	for v := 0; v < 5 && err == nil; v++ {
		err = commitSequence(ctx, m, v)
	}
	require.ErrorIs(t, err, store.ErrCrashed)
	restarted := m.CrashClone()
	got, err := restarted.Get(ctx, "_delta_log/00000000000000000003.json")
	require.NoError(t, err)
	require.Equal(t, "commit 3", string(got))
	hint, err := restarted.Get(ctx, "_delta_log/_last_checkpoint")
	require.NoError(t, err)
	require.Equal(t, "2", string(hint), "the hint after the crash point was never written")
}

func TestMemRecordsOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := store.NewMem()
	require.NoError(t, commitSequence(ctx, m, 0))
	require.ErrorIs(t, m.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", nil), store.ErrExists)
	_, err := m.Get(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, 2, m.Count(store.OpPutIfAbsent))
	require.Equal(t, 2, m.Count(store.OpPut))
	require.Equal(t, "put part-0.parquet ok\n"+
		"put-if-absent _delta_log/00000000000000000000.json ok\n"+
		"put _delta_log/_last_checkpoint ok\n"+
		"put-if-absent _delta_log/00000000000000000000.json exists\n"+
		"get nope not-found\n", m.TraceString())
}

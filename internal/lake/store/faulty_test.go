package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

var errDiskFull = errors.New("no space left on device")

func TestFaultyErrorByOpKeyAndIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := store.NewFaulty(store.NewMem(), store.Rule{
		Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/*.json", After: 1, Times: 1, Err: errDiskFull,
	})
	require.NoError(t, f.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("v0")))
	err := f.PutIfAbsent(ctx, "_delta_log/00000000000000000001.json", []byte("v1"))
	require.ErrorIs(t, err, store.ErrInjected)
	require.ErrorIs(t, err, errDiskFull)
	_, err = f.Get(ctx, "_delta_log/00000000000000000001.json")
	require.ErrorIs(t, err, store.ErrNotFound, "an injected error must not apply the write")
	require.NoError(t, f.PutIfAbsent(ctx, "_delta_log/00000000000000000001.json", []byte("v1")), "the rule fired once")
	require.NoError(t, f.PutIfAbsent(ctx, "other.json", []byte("x")), "the key pattern does not match")
	require.Equal(t, "put-if-absent _delta_log/00000000000000000000.json ok\n"+
		"put-if-absent _delta_log/00000000000000000001.json injected-error\n"+
		"get _delta_log/00000000000000000001.json not-found\n"+
		"put-if-absent _delta_log/00000000000000000001.json ok\n"+
		"put-if-absent other.json ok\n", f.TraceString())
}

func TestFaultyTransientIsRetriedLikeABackendWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPut}, Kind: store.FaultTransient, Times: 2})
	require.NoError(t, f.Put(ctx, "part-0.parquet", bytes.NewReader([]byte("rows")), 4))
	got, err := f.Get(ctx, "part-0.parquet")
	require.NoError(t, err)
	require.Equal(t, "rows", string(got), "the retried put sent the whole body again")
	require.Equal(t, []store.TraceEntry{
		{Op: store.OpPut, Key: "part-0.parquet", Outcome: "injected-transient"},
		{Op: store.OpPut, Key: "part-0.parquet", Outcome: "injected-transient"},
		{Op: store.OpPut, Key: "part-0.parquet", Outcome: "ok"},
		{Op: store.OpGet, Key: "part-0.parquet", Outcome: "ok"},
	}, f.Trace())

	// A fault that never clears exhausts the retry budget.
	f.SetRules(store.Rule{Ops: []store.OpKind{store.OpList}, Kind: store.FaultTransient})
	_, err = f.List(ctx, "", "")
	require.ErrorIs(t, err, store.ErrInjected)
	require.ErrorContains(t, err, "gave up after 5 attempts")
}

func TestFaultyTimeoutOfAWriteIsAmbiguousAndNotApplied(t *testing.T) {
	t.Parallel()
	f := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultTimeout, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := f.PutIfAbsent(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, store.ErrAmbiguous)
	_, err = f.Get(context.Background(), "k")
	require.ErrorIs(t, err, store.ErrNotFound)

	f.SetRules(store.Rule{Ops: []store.OpKind{store.OpGet}, Kind: store.FaultTimeout, Delay: time.Millisecond})
	_, err = f.Get(context.Background(), "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, store.ErrAmbiguous)
}

func TestFaultyAmbiguousWriteLandsButReportsUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultAmbiguous, Times: 1})
	err := f.PutIfAbsent(ctx, "_delta_log/00000000000000000007.json", []byte("mine"))
	require.ErrorIs(t, err, store.ErrAmbiguous)
	// Resolution by reading back: the object is there and it is ours.
	got, err := f.Get(ctx, "_delta_log/00000000000000000007.json")
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	// A blind retry would now report a loss for a write that won.
	require.ErrorIs(t, f.PutIfAbsent(ctx, "_delta_log/00000000000000000007.json", []byte("mine")), store.ErrExists)
	require.Equal(t, "injected-ambiguous-ok", f.Trace()[0].Outcome)
}

func TestFaultyDelayRespectsContext(t *testing.T) {
	t.Parallel()
	f := store.NewFaulty(store.NewMem(), store.Rule{Kind: store.FaultDelay, Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.PutIfAbsent(ctx, "k", nil)
	require.ErrorIs(t, err, context.Canceled)
	f.SetRules(store.Rule{Kind: store.FaultDelay, Delay: time.Microsecond})
	require.NoError(t, f.PutIfAbsent(context.Background(), "k", nil))
	_, err = f.Inner().Stat(context.Background(), "k")
	require.NoError(t, err)
}

// notConditional is a store whose put-if-absent overwrites, like an S3
// gateway that ignores If-None-Match.
type notConditional struct{ store.Store }

func (n notConditional) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return n.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

func TestProbeDetectsAStoreThatIgnoresPutIfAbsent(t *testing.T) {
	t.Parallel()
	err := store.Probe(context.Background(), notConditional{store.NewMem()})
	require.ErrorIs(t, err, store.ErrUnsupported)
	require.ErrorContains(t, err, "does not honor conditional writes")
}

func TestFaultyReadsOfOpenedObjectsOnlyWhenARuleNamesThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := store.NewMem()
	require.NoError(t, m.Put(ctx, "part-0.parquet", bytes.NewReader([]byte("0123456789")), 10))

	// A catch-all rule does not touch reads, and reads are not traced.
	f := store.NewFaulty(m, store.Rule{Ops: []store.OpKind{store.OpDelete}})
	obj, err := f.Open(ctx, "part-0.parquet")
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = obj.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Len(t, f.Trace(), 1)

	// The footer read (the second read) fails.
	f = store.NewFaulty(m, store.Rule{Ops: []store.OpKind{store.OpRead}, Key: "*.parquet", After: 1, Times: 1, Err: errDiskFull})
	obj, err = f.Open(ctx, "part-0.parquet")
	require.NoError(t, err)
	n, err := obj.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, "0123", string(buf[:n]))
	_, err = obj.ReadAt(buf, 6)
	require.ErrorIs(t, err, errDiskFull)
	n, err = obj.ReadAt(buf, 8)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "89", string(buf[:n]))
	require.Equal(t, "open part-0.parquet ok\n"+
		"read part-0.parquet ok\n"+
		"read part-0.parquet injected-error\n"+
		"read part-0.parquet ok\n", f.TraceString())
}

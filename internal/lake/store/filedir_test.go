package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

// The fence between a directory's creation and the writes into it. Writer A
// creates a directory and is paused after os.Mkdir, before it fsyncs the
// directory's parent; writer B writes into that directory (or below it) at
// the same time. B must not acknowledge before A's fsync, because until
// then a power loss can drop the directory and B's object with it.

type dirFenceCase struct {
	name      string
	created   string // the directory A is paused in creating
	keyA      string // A's write, which creates it
	keyB      string // B's write, into it or below it
	ifAbsent  bool   // B uses PutIfAbsent, not Put
	twoStores bool   // B writes through a second File over the same root
}

var dirFenceCases = []dirFenceCase{
	{name: "put into the same directory", created: "t/d", keyA: "t/d/a", keyB: "t/d/b"},
	{name: "put-if-absent into the same directory", created: "t/d", keyA: "t/d/a", keyB: "t/d/b", ifAbsent: true},
	{name: "put below an ancestor being created", created: "a", keyA: "a/x", keyB: "a/b/c"},
	{name: "put-if-absent below an ancestor being created", created: "a", keyA: "a/x", keyB: "a/b/c", ifAbsent: true},
	{name: "put through a second store over the same root", created: "t/d", keyA: "t/d/a", keyB: "t/d/b", twoStores: true},
}

// dirFence is one run of a case: A's store with its creation of
// tc.created paused, B's store that reports when it starts waiting.
type dirFence struct {
	tc       dirFenceCase
	root     string
	a, b     *store.File
	paused   chan struct{} // closed when A is paused after os.Mkdir
	release  chan struct{} // close to let A fsync the parent
	waiting  chan string   // the directories B waits for
	syncs    atomic.Int32  // parent fsyncs of tc.created (tries included)
	failures int32         // how many of them fail
}

func newDirFence(t *testing.T, tc dirFenceCase, failures int32) *dirFence {
	t.Helper()
	x := &dirFence{tc: tc, root: t.TempDir(), paused: make(chan struct{}), release: make(chan struct{}),
		waiting: make(chan string, 8), failures: failures}
	var err error
	x.a, err = store.NewFile(x.root)
	require.NoError(t, err)
	x.b = x.a
	if tc.twoStores {
		x.b, err = store.NewFile(x.root)
		require.NoError(t, err)
	}
	created := filepath.Join(x.root, filepath.FromSlash(tc.created))
	before := func(dir string) error {
		if dir != created {
			return nil
		}
		n := x.syncs.Add(1)
		if n == 1 {
			close(x.paused)
			<-x.release
		}
		if n <= x.failures {
			return errors.New("injected fsync failure")
		}
		return nil
	}
	wait := func(dir string) { x.waiting <- dir }
	store.SetFileDirHooks(x.a, before, wait)
	if x.b != x.a {
		store.SetFileDirHooks(x.b, before, wait)
	}
	return x
}

func (x *dirFence) write(ctx context.Context, s *store.File, key string, ifAbsent bool) error {
	if ifAbsent {
		return s.PutIfAbsent(ctx, key, []byte(key))
	}
	return s.Put(ctx, key, nil, 0)
}

// start runs A until it is paused, then B; it returns A's and B's results
// and the directory B reports waiting for. B returning before it waits
// fails the test: it acknowledged (or failed) without waiting for A.
func (x *dirFence) start(t *testing.T, ctxB context.Context) (aDone, bDone chan error) {
	t.Helper()
	ctx := context.Background()
	aDone, bDone = make(chan error, 1), make(chan error, 1)
	go func() { aDone <- x.write(ctx, x.a, x.tc.keyA, false) }()
	<-x.paused
	go func() { bDone <- x.write(ctxB, x.b, x.tc.keyB, x.tc.ifAbsent) }()
	select {
	case err := <-bDone:
		t.Fatalf("B's write of %s returned (%v) while %s, created by A, is not yet fsynced into its parent", x.tc.keyB, err, x.tc.created)
	case dir := <-x.waiting:
		require.Equal(t, filepath.Join(x.root, filepath.FromSlash(x.tc.created)), dir, "B waits for the wrong directory")
	}
	select {
	case err := <-bDone:
		t.Fatalf("B's write returned (%v) while A is still paused", err)
	default:
	}
	return aDone, bDone
}

func TestFileWriteIntoDirectoryBeingCreatedWaitsForItsParentFsync(t *testing.T) {
	t.Parallel()
	for _, tc := range dirFenceCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newDirFence(t, tc, 0)
			aDone, bDone := x.start(t, context.Background())
			close(x.release)
			require.NoError(t, <-bDone)
			require.NoError(t, <-aDone)
			ctx := context.Background()
			for _, key := range []string{tc.keyA, tc.keyB} {
				_, err := x.b.Get(ctx, key)
				require.NoError(t, err, key)
			}
			require.EqualValues(t, 1, x.syncs.Load(), "the parent of %s is fsynced once", tc.created)
		})
	}
}

// When A's fsync of the parent fails, the directory exists but is not
// durable. B fails too and publishes nothing (so a PutIfAbsent retry does
// not meet its own object as ErrExists); B's retry fsyncs the parent again
// itself and, that fsync succeeding, stores the object.
func TestFileWriteIntoDirectoryWhoseParentFsyncFailedFailsAndARetryFsyncsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range dirFenceCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			x := newDirFence(t, tc, 1)
			aDone, bDone := x.start(t, ctx)
			close(x.release)
			errB := <-bDone
			require.ErrorContains(t, errB, "could not be fsynced into its parent")
			require.ErrorContains(t, errB, "nothing written in it is known to be durable")
			require.NotErrorIs(t, errB, store.ErrExists)
			require.ErrorContains(t, <-aDone, "injected fsync failure")
			_, err := x.b.Get(ctx, tc.keyB)
			require.ErrorIs(t, err, store.ErrNotFound, "B's failed write published its object")

			require.NoError(t, x.write(ctx, x.b, tc.keyB, tc.ifAbsent), "the retry")
			require.EqualValues(t, 2, x.syncs.Load(), "the retry fsyncs the parent of %s again", tc.created)
			got, err := x.b.Get(ctx, tc.keyB)
			require.NoError(t, err)
			if tc.ifAbsent {
				require.Equal(t, tc.keyB, string(got))
			}
			require.NoError(t, x.write(ctx, x.b, tc.keyB+"2", tc.ifAbsent))
			require.EqualValues(t, 2, x.syncs.Load(), "once the retry succeeded, later writes do not fsync the parent again")
		})
	}
}

func TestFileWriteWaitingForADirectoryCreationStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	x := newDirFence(t, dirFenceCases[0], 0)
	aDone, bDone := x.start(t, ctx)
	cancel()
	require.ErrorIs(t, <-bDone, context.Canceled)
	close(x.release)
	require.NoError(t, <-aDone)
	_, err := x.b.Get(context.Background(), x.tc.keyB)
	require.ErrorIs(t, err, store.ErrNotFound, "the cancelled write published its object")
}

package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// putTimeline is one group-mode put's steps on the test's logical clock.
type putTimeline struct{ written, published, durable int64 }

// note records that the put reached step at tick at.
func (p *putTimeline) note(step putStep, at int64) {
	switch step {
	case stepWritten:
		p.written = at
	case stepPublished:
		p.published = at
	case stepDurable:
		p.durable = at
	}
}

// roundSpan is one round's start and end on the same clock.
type roundSpan struct{ start, end int64 }

// TestFileGroupSync_ManyConcurrentPuts_PublishAfterARoundStartedAfterTheWriteAndAckAfterARoundStartedAfterThePublish
// drives hundreds of commit-like put pairs from many goroutines through an
// instrumented round and checks both fences of every put on one logical
// clock: a round that started after the temporary file was written ended
// before the rename or link, and one that started after the publish ended
// before the put returned.
func TestFileGroupSync_ManyConcurrentPuts_PublishAfterARoundStartedAfterTheWriteAndAckAfterARoundStartedAfterThePublish(t *testing.T) {
	t.Parallel()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	var (
		clock  atomic.Int64
		mu     sync.Mutex
		rounds []roundSpan
		puts   = map[string]*putTimeline{}
	)
	f.group.round = func() error {
		start := clock.Add(1)
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) // let puts arrive mid-round
		end := clock.Add(1)
		mu.Lock()
		rounds = append(rounds, roundSpan{start, end})
		mu.Unlock()
		return nil
	}
	f.observe = func(step putStep, tmp string, _ bool) {
		at := clock.Add(1)
		mu.Lock()
		defer mu.Unlock()
		p := puts[tmp]
		if p == nil {
			p = &putTimeline{}
			puts[tmp] = p
		}
		p.note(step, at)
	}

	const goroutines, pairs = 40, 8
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range pairs {
				table := fmt.Sprintf("tenant-%d/bronze/events-%d", g, i)
				body := []byte(fmt.Sprintf("pair %d/%d", g, i))
				if err := f.Put(ctx, table+"/part-0.parquet", bytes.NewReader(body), int64(len(body))); err != nil {
					t.Error(err)
					return
				}
				if err := f.PutIfAbsent(ctx, table+"/_delta_log/00000000000000000000.json", body); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	require.Len(t, puts, 2*goroutines*pairs)
	roundAfter := func(from, to int64) bool {
		for _, r := range rounds {
			if r.start > from && r.end < to {
				return true
			}
		}
		return false
	}
	for tmp, p := range puts {
		require.NotZero(t, p.durable, "%s never acknowledged", tmp)
		require.True(t, roundAfter(p.written, p.published), "%s was published (t=%d) without a round that started after its write (t=%d)", tmp, p.published, p.written)
		require.True(t, roundAfter(p.published, p.durable), "%s was acknowledged (t=%d) without a round that started after its publish (t=%d)", tmp, p.durable, p.published)
	}
	t.Logf("%d puts, %d rounds", len(puts), len(rounds))
	require.Less(t, len(rounds), 2*len(puts), "concurrent puts shared no round")
}

// blockedFirstRound is a round function whose first round blocks until
// release is closed (started is closed when it begins) and whose later
// rounds return later.
type blockedFirstRound struct {
	n        atomic.Int32
	started  chan struct{}
	release  chan struct{}
	later    error
	lastDone atomic.Int32 // the number of the last round that ended
}

func newBlockedFirstRound(later error) *blockedFirstRound {
	return &blockedFirstRound{started: make(chan struct{}), release: make(chan struct{}), later: later}
}

func (b *blockedFirstRound) round() error {
	n := b.n.Add(1)
	defer b.lastDone.Store(n)
	if n == 1 {
		close(b.started)
		<-b.release
		return nil
	}
	return b.later
}

// waitJoined waits until n callers joined the round after the running one.
func waitJoined(t *testing.T, g *groupSync, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.rounds.pending != nil && g.rounds.pending.waiters == n
	}, 10*time.Second, time.Millisecond)
}

func TestGroupSync_PutArrivingWhileARoundRuns_WaitsForTheNextRound(t *testing.T) {
	t.Parallel()
	g := newGroupSync(t.TempDir())
	b := newBlockedFirstRound(nil)
	g.round = b.round
	first := make(chan error, 1)
	go func() { first <- g.wait(context.Background()) }()
	<-b.started

	late := make(chan int32, 1)
	go func() {
		require.NoError(t, g.wait(context.Background()))
		late <- b.lastDone.Load()
	}()
	waitJoined(t, g, 1)
	select {
	case <-late:
		t.Fatal("a put that arrived mid-round returned before that round ended")
	default:
	}
	close(b.release)
	require.NoError(t, <-first)
	require.Equal(t, int32(2), <-late, "the put that arrived mid-round returned before the next round ended")
	require.Equal(t, int32(2), b.n.Load())
}

func TestGroupSync_FailedRound_FailsEveryPutWaitingOnIt(t *testing.T) {
	t.Parallel()
	g := newGroupSync(t.TempDir())
	boom := errors.New("syncfs: input/output error")
	b := newBlockedFirstRound(boom)
	g.round = b.round
	first := make(chan error, 1)
	go func() { first <- g.wait(context.Background()) }()
	<-b.started

	const waiters = 50
	errs := make(chan error, waiters)
	for range waiters {
		go func() { errs <- g.wait(context.Background()) }()
	}
	waitJoined(t, g, waiters)
	close(b.release)
	require.NoError(t, <-first)
	for range waiters {
		require.ErrorIs(t, <-errs, boom)
	}
	require.Equal(t, int32(2), b.n.Load(), "the waiters of one round ran more than one")
}

func TestGroupSync_ContextEndsWhileWaiting_ReturnsTheContextError(t *testing.T) {
	t.Parallel()
	g := newGroupSync(t.TempDir())
	b := newBlockedFirstRound(nil)
	g.round = b.round
	go g.wait(context.Background())
	<-b.started
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.wait(ctx) }()
	waitJoined(t, g, 1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	close(b.release)
	require.NoError(t, g.wait(context.Background()), "the rounds go on after a waiter left")
}

func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isTempName(d.Name()) {
			out = append(out, p)
		}
		return err
	}))
	return out
}

func TestFileGroupSync_FirstRoundFails_PutPublishesNothingAndRemovesItsTemp(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f, err := NewFile(root, WithSync(SyncGroup))
	require.NoError(t, err)
	boom := errors.New("syncfs: input/output error")
	f.group.round = func() error { return boom }
	ctx := context.Background()
	require.ErrorIs(t, f.Put(ctx, "t/part-0.parquet", bytes.NewReader([]byte("x")), 1), boom)
	require.ErrorIs(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("x")), boom)
	for _, key := range []string{"t/part-0.parquet", "t/_delta_log/0.json"} {
		_, err := f.Get(ctx, key)
		require.ErrorIs(t, err, ErrNotFound, key)
	}
	require.Empty(t, tempFiles(t, root))
}

func TestFileGroupSync_SecondRoundFails_ObjectVisibleButPutFailsAndRetryMeetsIt(t *testing.T) {
	t.Parallel()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	boom := errors.New("syncfs: input/output error")
	var n atomic.Int32
	f.group.round = func() error {
		if n.Add(1)%2 == 0 { // each put's second round
			return boom
		}
		return nil
	}
	ctx := context.Background()
	require.ErrorIs(t, f.Put(ctx, "t/part-0.parquet", bytes.NewReader([]byte("data")), 4), boom)
	got, err := f.Get(ctx, "t/part-0.parquet")
	require.NoError(t, err)
	require.Equal(t, "data", string(got))

	require.ErrorIs(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("commit")), boom)
	got, err = f.Get(ctx, "t/_delta_log/0.json")
	require.NoError(t, err)
	require.Equal(t, "commit", string(got))
	require.ErrorIs(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("commit")), ErrExists, "a retry meets its own commit, which Delta reads back")
}

// TestFileGroupSync_PartOfTheTreeOnAnotherFilesystem_FlushedPerFile puts
// below a symbolic link to /dev/shm (tmpfs): syncfs of the lake's
// filesystem would not flush it, so those puts take no round.
func TestFileGroupSync_PartOfTheTreeOnAnotherFilesystem_FlushedPerFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	other, err := os.MkdirTemp("/dev/shm", "oml-groupsync-")
	if err != nil {
		t.Skipf("no /dev/shm to put a second filesystem below the root: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	rootInfo, err := os.Stat(root)
	require.NoError(t, err)
	otherInfo, err := os.Stat(other)
	require.NoError(t, err)
	rootDev, _ := device(rootInfo)
	otherDev, _ := device(otherInfo)
	if rootDev == otherDev {
		t.Skip("/dev/shm is on the test directory's filesystem")
	}
	require.NoError(t, os.Symlink(other, filepath.Join(root, "elsewhere")))

	f, err := NewFile(root, WithSync(SyncGroup))
	require.NoError(t, err)
	var rounds atomic.Int32
	f.group.round = func() error { rounds.Add(1); return nil }
	ctx := context.Background()
	require.NoError(t, f.PutIfAbsent(ctx, "elsewhere/t/_delta_log/0.json", []byte("x")))
	require.NoError(t, f.Put(ctx, "elsewhere/t/part-0.parquet", strings.NewReader("y"), 1))
	require.Zero(t, rounds.Load(), "a put on another filesystem waited for a syncfs that does not flush it")
	require.NoError(t, f.PutIfAbsent(ctx, "here/t/_delta_log/0.json", []byte("x")))
	require.Equal(t, int32(2), rounds.Load(), "a put on the root's filesystem takes two rounds")
}

func TestSameFilesystem_OnlyTheRootsDeviceIsCovered(t *testing.T) {
	t.Parallel()
	require.True(t, sameFilesystem(42, 42))
	require.False(t, sameFilesystem(42, 43))
}

package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// withKernel stands for the running kernel's release (sync=auto's check).
func withKernel(release string) FileOption {
	return func(f *File) { f.kernel = func() string { return release } }
}

// fakeClock is sync=auto's clock in tests: it moves only when told, so a
// round's or an fsync's cost is what the test says.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// autoStore is a sync=auto store on a kernel with a reporting syncfs,
// whose rounds (stand-ins: a test must not flush the machine's disk) each
// take roundCost on a fake clock; rounds counts them.
func autoStore(t *testing.T) (f *File, clock *fakeClock, roundCost *atomic.Int64, rounds *atomic.Int32) {
	t.Helper()
	f, err := NewFile(t.TempDir(), WithSync(SyncAuto), withKernel("6.1.0-13-amd64"))
	require.NoError(t, err)
	require.NotNil(t, f.auto)
	clock, roundCost, rounds = &fakeClock{}, &atomic.Int64{}, &atomic.Int32{}
	f.auto.now = clock.now
	f.group.round = func() error {
		rounds.Add(1)
		clock.advance(time.Duration(roundCost.Load()))
		return nil
	}
	return f, clock, roundCost, rounds
}

func TestSyncfsReportsErrors_From5Point8(t *testing.T) {
	t.Parallel()
	for release, want := range map[string]bool{
		"5.8.0": true, "5.8-rc1": true, "5.10.0-28-amd64": true, "6.1": true, "6.18.44-fc-v1045": true, "10.0.0": true,
		"5.7.19": false, "4.19.0-27-amd64": false, "3.10.0-1160.el7.x86_64": false,
		"": false, "Linux": false, "5": false, "5.x": false,
	} {
		require.Equal(t, want, syncfsReportsErrors(release), release)
	}
}

func TestFileAuto_ModeChosenByKernelVersion_RoundsFrom5Point8PerFileBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for release, want := range map[string]FileSync{"5.8.0": SyncGroup, "6.1.0-13-amd64": SyncGroup, "5.7.19": SyncPerFile, "4.19.0": SyncPerFile, "": SyncPerFile} {
		f, err := NewFile(t.TempDir(), WithSync(SyncAuto), withKernel(release))
		require.NoError(t, err)
		require.Equal(t, SyncAuto, f.SyncMode(), release)
		require.Equal(t, want, f.SyncInEffect(), release)
		wantPar := FileConcurrency
		if want == SyncGroup {
			wantPar = FileGroupConcurrency
		}
		require.Equal(t, wantPar, f.Concurrency(), release)
		var groupPuts, filePuts atomic.Int32
		f.observe = func(step putStep, _ string, group bool) {
			if step == stepDurable {
				if group {
					groupPuts.Add(1)
				} else {
					filePuts.Add(1)
				}
			}
		}
		require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")), release)
		if want == SyncGroup {
			require.Equal(t, int32(1), groupPuts.Load(), release)
		} else {
			require.Equal(t, int32(1), filePuts.Load(), release)
			require.Nil(t, f.group, "%s: no rounds on a kernel whose syncfs does not report write-back errors", release)
		}
	}
}

// TestFileAuto_SlowRounds_FallBackToPerFile_ThenRoundsAgainAfterTheBackoff
// makes each round cost 20 ms of one waiter (against the 1 ms prior of an
// fsync, twelve times that per wait: autoSlowFactor × autoFsyncsPerWait):
// after the first round and autoMinRounds more the store goes per
// file, its puts take
// no round and its concurrency is the per-file one; once the backoff has
// passed the next sizing of a batch (Concurrency) starts rounds again,
// which, fast now, stay; a put alone retries only after autoBackoffMax.
func TestFileAuto_SlowRounds_FallBackToPerFile_ThenRoundsAgainAfterTheBackoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, clock, roundCost, rounds := autoStore(t)
	roundCost.Store(int64(20 * time.Millisecond))
	put := func(i int) {
		t.Helper()
		require.NoError(t, f.PutIfAbsent(ctx, fmt.Sprintf("t/_delta_log/%d.json", i), []byte("v")))
	}
	i := 0
	for ; f.SyncInEffect() == SyncGroup; i++ {
		put(i)
		require.LessOrEqual(t, int(rounds.Load()), autoMinRounds+2, "rounds of 20 ms for one step each, against 1 ms an fsync, were kept")
	}
	require.Equal(t, int32(autoMinRounds+2), rounds.Load(), "the store went per file before the first round and autoMinRounds more were seen")
	require.Equal(t, FileConcurrency, f.Concurrency())

	fsyncs := f.auto.fsyncsSeen.Load()
	put(i)
	put(i + 1)
	require.Equal(t, int32(autoMinRounds+2), rounds.Load(), "a per-file put took a round")
	require.Equal(t, fsyncs+4, f.auto.fsyncsSeen.Load(), "per file: the file and its directory, measured")

	require.Equal(t, autoBackoffMin, f.auto.retryAt.Sub(f.auto.since), "the first backoff")
	clock.ns.Store(f.auto.retryAt.UnixNano() - 1)
	require.Equal(t, FileConcurrency, f.Concurrency(), "rounds again before the backoff passed")
	clock.advance(time.Nanosecond)
	roundCost.Store(0)
	require.Equal(t, SyncPerFile, f.SyncInEffect(), "a put retried rounds at the per-file concurrency")
	require.Equal(t, FileGroupConcurrency, f.Concurrency(), "rounds again for the next batch once the backoff passed")
	require.Equal(t, SyncGroup, f.SyncInEffect())
	for j := range 12 {
		put(i + 2 + j)
	}
	require.Equal(t, int32(autoMinRounds+2+24), rounds.Load(), "fast rounds are kept")
	require.Equal(t, SyncGroup, f.SyncInEffect())

	// Slow again soon after the retry: the next backoff is twice as long.
	roundCost.Store(int64(20 * time.Millisecond))
	for i += 14; f.SyncInEffect() == SyncGroup; i++ {
		put(i)
	}
	require.Equal(t, 2, f.auto.fallbackCount())
	require.Equal(t, 2*autoBackoffMin, f.auto.retryAt.Sub(f.auto.since), "the second backoff is doubled")
	clock.ns.Store(f.auto.since.Add(autoBackoffMax).UnixNano() - 1)
	require.Equal(t, SyncPerFile, f.SyncInEffect())
	clock.advance(time.Nanosecond)
	require.Equal(t, SyncGroup, f.SyncInEffect(), "a store nobody sizes retries rounds from its puts after autoBackoffMax")
}

// TestFileAuto_RoundsSixToTwelveTimesAnFsyncPerWait_AreKept: a wait for a
// round stands for two fsyncs per file (a commit waits for two rounds and
// makes four fsyncs), so rounds of 10 ms for one waiter each, against the
// 1 ms prior of an fsync, are kept: ten times an fsync per wait, five per
// fsync a commit makes. Compared wait for fsync (before session 22) the
// store went per file here, and at the lake writer's steady state over
// 10,000 tenants its batches then took twice as long per table commit.
func TestFileAuto_RoundsSixToTwelveTimesAnFsyncPerWait_AreKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, roundCost, rounds := autoStore(t)
	roundCost.Store(int64(10 * time.Millisecond))
	for i := range 4 * autoMinRounds {
		require.NoError(t, f.PutIfAbsent(ctx, fmt.Sprintf("t/_delta_log/%d.json", i), []byte("v")))
	}
	require.Greater(t, int(rounds.Load()), 2*autoMinRounds, "the puts waited for rounds")
	require.Equal(t, SyncGroup, f.SyncInEffect(), "rounds ten times an fsync per wait went per file")
	require.Zero(t, f.auto.fallbackCount())
	require.Equal(t, FileGroupConcurrency, f.Concurrency())
}

// putRecord is one put's protocol and steps on the test's logical clock.
type putRecord struct {
	putTimeline
	group bool
	dir   string
}

// TestFileAuto_ConcurrentPutsAcrossAFallbackAndTheReturnToRounds_EachDurableByItsProtocol
// runs many commit-like put pairs while the rounds turn slow (the store
// goes per file) and fast again (the clock passes the backoff: rounds
// again), recording every put's steps, every round and every directory
// fsync on one logical clock. Each put must have kept its own protocol
// completely: in rounds, a round that started after the write ended before
// the publish and one that started after the publish before the
// acknowledgement; per file, its file fsynced before the publish and an
// fsync of its directory that started after the publish ended before the
// acknowledgement.
func TestFileAuto_ConcurrentPutsAcrossAFallbackAndTheReturnToRounds_EachDurableByItsProtocol(t *testing.T) {
	t.Parallel()
	f, clock, roundCost, _ := autoStore(t)
	var (
		tick      atomic.Int64
		mu        sync.Mutex
		rounds    []roundSpan
		dirSyncs  = map[string][]roundSpan{}
		fileSyncs = map[string][]roundSpan{}
		puts      = map[string]*putRecord{}
	)
	real := f.group.round
	f.group.round = func() error {
		start := tick.Add(1)
		err := real()
		end := tick.Add(1)
		mu.Lock()
		rounds = append(rounds, roundSpan{start, end})
		mu.Unlock()
		return err
	}
	f.dirFsync = func(dir string) error {
		start := tick.Add(1)
		err := fsyncDir(dir)
		end := tick.Add(1)
		mu.Lock()
		dirSyncs[dir] = append(dirSyncs[dir], roundSpan{start, end})
		mu.Unlock()
		return err
	}
	f.fileFsync = func(fh *os.File) error {
		start := tick.Add(1)
		err := fh.Sync()
		end := tick.Add(1)
		mu.Lock()
		fileSyncs[fh.Name()] = append(fileSyncs[fh.Name()], roundSpan{start, end})
		mu.Unlock()
		return err
	}
	f.observe = func(step putStep, tmp string, group bool) {
		at := tick.Add(1)
		mu.Lock()
		defer mu.Unlock()
		p := puts[tmp]
		if p == nil {
			p = &putRecord{group: group, dir: filepath.Dir(tmp)}
			puts[tmp] = p
		}
		if p.group != group {
			t.Errorf("%s changed protocol midway", tmp)
		}
		p.note(step, at)
	}

	// Slow rounds from the start (a second, however many steps one
	// serves); once the store has gone per file and made some per-file
	// puts, fast rounds and the backoff passed.
	roundCost.Store(int64(time.Second))
	var returned atomic.Bool
	const goroutines, pairs = 16, 12
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range pairs {
				if f.auto.fallbackCount() > 0 && f.auto.fsyncsSeen.Load() > 40 && returned.CompareAndSwap(false, true) {
					roundCost.Store(0)
					clock.advance(autoBackoffMax)
				}
				table := fmt.Sprintf("tenant-%d/bronze/events-%d", g%4, i)
				body := []byte(fmt.Sprintf("pair %d/%d", g, i))
				if err := f.Put(ctx, fmt.Sprintf("%s/part-%d.parquet", table, g), bytes.NewReader(body), int64(len(body))); err != nil {
					t.Error(err)
					return
				}
				if err := f.PutIfAbsent(ctx, fmt.Sprintf("%s/_delta_log/%d.json", table, g), body); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, puts, 2*goroutines*pairs)
	within := func(spans []roundSpan, from, to int64) bool {
		for _, r := range spans {
			if r.start > from && r.end < to {
				return true
			}
		}
		return false
	}
	var groupPuts, filePuts int
	for tmp, p := range puts {
		require.NotZero(t, p.durable, "%s never acknowledged", tmp)
		if p.group {
			groupPuts++
			require.True(t, within(rounds, p.written, p.published), "%s was published without a round that started after its write", tmp)
			require.True(t, within(rounds, p.published, p.durable), "%s was acknowledged without a round that started after its publish", tmp)
			continue
		}
		filePuts++
		require.True(t, within(fileSyncs[tmp], p.written, p.published), "%s was published without an fsync of it after its write: %+v, fsyncs %v", tmp, *p, fileSyncs[tmp])
		require.True(t, within(dirSyncs[p.dir], p.published, p.durable), "%s was acknowledged without an fsync of %s that started after its publish", tmp, p.dir)
	}
	t.Logf("%d puts in rounds, %d per file, %d rounds, %d fallbacks", groupPuts, filePuts, len(rounds), f.auto.fallbackCount())
	require.True(t, returned.Load(), "the store never went per file")
	require.NotZero(t, filePuts)
	require.Greater(t, groupPuts, 8, "no puts in rounds after the return")
	require.Equal(t, SyncGroup, f.SyncInEffect())
}

// TestFileAuto_PerFilePutBelowADirectoryAGroupPutCreated_WaitsForThatPutsRound
// is the one thing puts of the two protocols share: a directory. A put in
// rounds creates t/d and waits for its round (held); the store goes per
// file; a per-file put into t/d must not acknowledge, whose fsyncs do not
// make t/d's entry in t durable, before that round has run.
func TestFileAuto_PerFilePutBelowADirectoryAGroupPutCreated_WaitsForThatPutsRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, _, _ := autoStore(t)
	b := newBlockedFirstRound(nil)
	f.group.round = b.round
	waiting := make(chan string, 4)
	f.waitingForDir = func(dir string) { waiting <- dir }

	first := make(chan error, 1)
	go func() { first <- f.Put(ctx, "t/d/part-0.parquet", bytes.NewReader([]byte("x")), 1) }()
	<-b.started

	f.auto.mu.Lock()
	f.auto.group, f.auto.since, f.auto.retryAt = false, f.auto.now(), f.auto.now().Add(time.Hour)
	f.auto.mu.Unlock()
	second := make(chan error, 1)
	go func() { second <- f.PutIfAbsent(ctx, "t/d/_delta_log/0.json", []byte("v0")) }()
	select {
	case err := <-second:
		t.Fatalf("a per-file put below t/d returned (%v) before the round that makes t/d durable ran", err)
	case dir := <-waiting:
		require.Equal(t, filepath.Join(f.root, "t", "d"), dir)
	case <-time.After(time.Minute):
		t.Fatal("the per-file put neither returned nor waited for t/d")
	}
	close(b.release)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
}

// TestFileAuto_FailedRound_FailsEveryPutWaitingOnIt: in auto mode, as in
// group mode, a failed syncfs fails every put that waited for that round,
// and none of them publishes.
func TestFileAuto_FailedRound_FailsEveryPutWaitingOnIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _, _, _ := autoStore(t)
	boom := errors.New("syncfs: input/output error")
	b := newBlockedFirstRound(boom)
	f.group.round = b.round
	go f.group.wait(ctx)
	<-b.started

	const waiters = 8
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() { errs <- f.PutIfAbsent(ctx, fmt.Sprintf("t/_delta_log/%d.json", i), []byte("v")) }()
	}
	waitJoined(t, f.group, waiters)
	close(b.release)
	for range waiters {
		require.ErrorIs(t, <-errs, boom)
	}
	for i := range waiters {
		_, err := f.Get(ctx, fmt.Sprintf("t/_delta_log/%d.json", i))
		require.ErrorIs(t, err, ErrNotFound, "a put whose round failed published")
	}
}

// TestFileGroup_ARoundEndsAPreparedDirectoryCreation_TheCommitTakesNoExtraRound:
// the Delta writer prepares a new table's _delta_log/, puts the first data
// file, then commits into _delta_log/. The data file's round before
// publishing started after _delta_log's mkdir, so it made it durable; the
// commit then takes its two rounds and no third.
func TestFileGroup_ARoundEndsAPreparedDirectoryCreation_TheCommitTakesNoExtraRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	var rounds atomic.Int32
	f.group.round = func() error { rounds.Add(1); return nil }
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	require.NoError(t, f.Put(ctx, "t/part-0.parquet", bytes.NewReader([]byte("x")), 1))
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	require.Equal(t, int32(4), rounds.Load(), "two puts, two rounds each")
}

// TestFileAuto_ASlowFirstRoundOfAPhase_IsNotCounted: a phase's first round
// writes back what other writers dirtied while no round ran (a second for
// one waiter was seen on a busy machine); the fast rounds after it are
// what rounds cost, and the store keeps them.
func TestFileAuto_ASlowFirstRoundOfAPhase_IsNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, clock, _, _ := autoStore(t)
	var rounds atomic.Int32
	f.group.round = func() error {
		if rounds.Add(1) == 1 {
			clock.advance(time.Second)
		} else {
			clock.advance(100 * time.Microsecond)
		}
		return nil
	}
	for i := range 3 * autoMinRounds {
		require.NoError(t, f.PutIfAbsent(ctx, fmt.Sprintf("t/_delta_log/%d.json", i), []byte("v")))
	}
	require.Equal(t, int32(6*autoMinRounds), rounds.Load())
	require.Equal(t, SyncGroup, f.SyncInEffect(), "one slow first round sent the store per file")
}

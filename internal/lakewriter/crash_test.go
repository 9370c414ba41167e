package lakewriter_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay the randomized lake writer tests with this seed")
	seedsFlag = flag.Int("seeds", 3, "how many seeds the randomized lake writer tests run per case")
)

// seeds returns the seeds to run: -seed S replays one; otherwise -seeds N
// seeds derived from the clock, each printed so a failure can be replayed.
func seeds(t *testing.T) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	base := uint64(time.Now().UnixNano())
	out := make([]uint64, *seedsFlag)
	for i := range out {
		out[i] = base + uint64(i)*7919
	}
	return out
}

// eachSeed runs fn as a parallel subtest "<prefix>seed=N" for each seed,
// after logging the command that replays it (run is the -run pattern).
func eachSeed(t *testing.T, prefix, run string, fn func(t *testing.T, seed uint64)) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("%sseed=%d", prefix, seed), func(t *testing.T) {
			t.Parallel()
			t.Logf("replay with: go test ./internal/lakewriter -run '%s' -seed %d", run, seed)
			fn(t, seed)
		})
	}
}

// drainCrashingAfter runs one DrainOnce of a drainer of o that crashes at
// the k-th reaching of p (crashAfter): true when it crashed, and then the
// run must have ended in ErrCrashed; when p was not reached k times, the
// run must have succeeded.
func drainCrashingAfter(t *testing.T, o lakewriter.Options, p lakewriter.CrashPoint, k int) bool {
	t.Helper()
	hook, fired := crashAfter(p, k)
	o.Crash = hook
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(context.Background())
	if fired() {
		require.ErrorIs(t, err, lakewriter.ErrCrashed)
		return true
	}
	require.NoError(t, err)
	return false
}

// crashAfter returns a crash hook that fires at the k-th time point p is
// reached (k ≥ 1), and reports whether it fired. Once it has fired the
// process is dead: every later crash point fails too, so no other table of
// the batch starts writing after the crash (tables already past their data
// files may still commit, as in a real crash with commits in flight).
func crashAfter(p lakewriter.CrashPoint, k int) (func(lakewriter.CrashPoint, tables.TableKey) error, func() bool) {
	var mu sync.Mutex
	n, fired := 0, false
	return func(got lakewriter.CrashPoint, _ tables.TableKey) error {
			mu.Lock()
			defer mu.Unlock()
			if fired {
				return errors.New("the process is already dead")
			}
			if got != p {
				return nil
			}
			n++
			if n == k {
				fired = true
				return errors.New("injected crash")
			}
			return nil
		}, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return fired
		}
}

// TestCrash_AtEveryNamedPoint_RestartDrainsExactlyOnce crashes the writer
// at each named step of the protocol (after data files are written, after
// table k of n commits, before and after the frontier update, between
// counting a poison row's attempt and dead-lettering it), several times in
// a row, restarts it with nothing but the database and the lake, drains to
// the end, and checks the lake against the journal fold.
func TestCrash_AtEveryNamedPoint_RestartDrainsExactlyOnce(t *testing.T) {
	t.Parallel()
	points := []lakewriter.CrashPoint{
		lakewriter.AfterDataFiles, lakewriter.AfterTableCommit, lakewriter.BeforeFrontierUpdate,
		lakewriter.AfterFrontierUpdate, lakewriter.MidDeadLetter,
	}
	for _, p := range points {
		eachSeed(t, string(p)+"/", "TestCrash_AtEveryNamedPoint", func(t *testing.T, seed uint64) {
			rng := rand.New(rand.NewPCG(seed, 1))
			b := setup(t, 2+rng.IntN(3))
			b.load(t, workload.Config{Claims: 15 + rng.IntN(25), Seed: seed, Poison: 1 + rng.IntN(3),
				RetractRatio: 0.4, FollowUpRatio: 0.5})
			lake := store.NewMem()
			last := b.lastSeq(t)
			// The last rounds aim at the final batch (x, last]: nothing
			// after it would repair what a crash there leaves behind.
			x := b.finalBatchStart(t, 2, rng.IntN(10))
			crashes := 0
			for round := 0; round < 3; round++ {
				// The first round crashes at the first occurrence, so the
				// point is surely reached; later rounds at a random one.
				k := 1
				if round > 0 {
					k = 1 + rng.IntN(6)
				}
				o := b.opts(lake)
				o.Limits = lakewriterLimits(5 + rng.IntN(60))
				o.CheckpointInterval = 2 + rng.IntN(4)
				// Few open tables: writers are evicted and reopened from
				// their logs between and inside batches (registry.go).
				o.MaxOpenTables = 1 + rng.IntN(3)
				o.StopAt = x
				if drainCrashingAfter(t, o, p, k) {
					crashes++
				}
			}
			// Up to the final batch without a crash (finishing whatever
			// the last round interrupted), then crash in the final batch,
			// one table at a time so the crash leaves it partly committed.
			b.drainTo(t, lake, x)
			if drainCrashingAfter(t, b.finalBatchOpts(lake), p, 1) {
				crashes++
			}
			if p == lakewriter.AfterTableCommit {
				touched := b.tablesIn(t, x, last)
				require.GreaterOrEqual(t, len(touched), 2)
				require.Len(t, committedThrough(t, lake, touched, last), 1,
					"the crash after one table's commit leaves the final batch partly committed")
			}

			b.drainInto(t, lake)
			b.verifyLake(t, lake)
			if p != lakewriter.MidDeadLetter {
				require.NotZero(t, crashes, "the crash point was never reached")
			}
		})
	}
}

// TestCrash_StoreDiesMidWrite_RestartDrainsExactlyOnce kills the lake at a
// random store write (data file, commit, checkpoint or _last_checkpoint),
// with the write applied or not, as a process killed mid-request would
// leave it; the restarted writer sees exactly what the store acknowledged.
func TestCrash_StoreDiesMidWrite_RestartDrainsExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds(t) {
		for _, where := range []string{"any", "commit", "checkpoint", "last_checkpoint"} {
			t.Run(fmt.Sprintf("%s/seed=%d", where, seed), func(t *testing.T) {
				t.Parallel()
				t.Logf("replay with: go test ./internal/lakewriter -run 'TestCrash_StoreDiesMidWrite' -seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 2))
				b := setup(t, 3)
				b.load(t, workload.Config{Claims: 30, Seed: seed, RetractRatio: 0.5, FollowUpRatio: 0.5})
				mem := store.NewMem()
				var lake store.Store = mem
				for round := 0; round < 4; round++ {
					k := rng.IntN(40)
					apply := rng.IntN(2) == 0
					var mu sync.Mutex
					seen := 0
					mem.CrashWhen(func(op store.OpKind, key string) (bool, bool) {
						match := where == "any" ||
							(where == "commit" && strings.HasSuffix(key, ".json") && strings.Contains(key, "_delta_log/")) ||
							(where == "checkpoint" && strings.HasSuffix(key, ".checkpoint.parquet")) ||
							(where == "last_checkpoint" && strings.HasSuffix(key, "_last_checkpoint"))
						if !match {
							return false, false
						}
						mu.Lock()
						defer mu.Unlock()
						seen++
						return seen == k+1, apply
					})
					o := b.opts(lake)
					o.CheckpointInterval = 2
					o.Limits = lakewriterLimits(10 + rng.IntN(30))
					d, err := lakewriter.New(o)
					require.NoError(t, err)
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { _, err := d.DrainOnce(ctx); done <- err }()
					func() {
						tick := time.NewTicker(time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-done:
								return
							case <-tick.C:
								if mem.Crashed() {
									cancel()
									<-done
									return
								}
							}
						}
					}()
					cancel()
					if mem.Crashed() {
						mem = mem.CrashClone() // the restarted process's view
						lake = mem
					}
				}
				mem.CrashWhen(nil)
				b.drainInto(t, lake)
				b.verifyLake(t, lake)
			})
		}
	}
}

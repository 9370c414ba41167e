package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// survives reports whether every name on key's path would survive a power
// loss now (requireSurvives, as a value).
func (m *powerLoss) survives(key string) bool { return m.lost(key) == "" }

// holdRounds holds each of the store's next n rounds, after it has taken
// the names it flushes: in[i] is closed when round i+1 is held there, and
// it goes on when release[i] is closed.
func (m *powerLoss) holdRounds(n int) (in, release []chan struct{}) {
	for range n {
		in, release = append(in, make(chan struct{})), append(release, make(chan struct{}))
	}
	var count atomic.Int32
	m.inRound = func() {
		if i := int(count.Add(1)) - 1; i < n {
			close(in[i])
			<-release[i]
		}
	}
	return in, release
}

// countRounds counts the store's rounds (after newPowerLoss replaced them).
func countRounds(f *File) *atomic.Int32 {
	var n atomic.Int32
	round := f.group.round
	f.group.round = func() error {
		n.Add(1)
		return round()
	}
	return &n
}

// checkOwedAtPublish fails the test if, when a log entry's put publishes
// (its link or rename, before its own flush after it), any of the data
// keys is not durable yet: a commit must never name a file a crash can
// lose. It returns how many publishes it checked.
func checkOwedAtPublish(t *testing.T, f *File, m *powerLoss, data ...string) *atomic.Int32 {
	var checked atomic.Int32
	f.observe = func(step putStep, tmp string, _ bool) {
		if step != stepPublished || !strings.Contains(tmp, "_delta_log") {
			return
		}
		checked.Add(1)
		for _, k := range data {
			if !m.survives(k) {
				t.Errorf("the commit %s was published while the data file %s it names could still be lost", tmp, k)
			}
		}
	}
	return &checked
}

// newAutoPowerLoss is a sync=auto store on a kernel whose syncfs reports
// errors (so it starts in rounds), under the power-loss model.
func newAutoPowerLoss(t *testing.T) (*File, *powerLoss) {
	t.Helper()
	f, err := NewFile(t.TempDir(), WithSync(SyncAuto), withKernel("6.1.0-13-amd64"))
	require.NoError(t, err)
	require.NotNil(t, f.auto)
	return f, newPowerLoss(t, f)
}

// goPerFile makes a sync=auto store fall back to per-file fsyncs for the
// next hour, as slow rounds would.
func goPerFile(f *File) {
	f.auto.mu.Lock()
	f.auto.group, f.auto.since, f.auto.retryAt = false, f.auto.now(), f.auto.now().Add(time.Hour)
	f.auto.mu.Unlock()
}

func putOwedKey(t *testing.T, f *File, key string) {
	t.Helper()
	require.NoError(t, PutOwed(context.Background(), f, key, bytes.NewReader([]byte(key)), int64(len(key))))
	got, err := f.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, key, string(got), "an owed put is visible when it returns")
}

// A new table as the Delta writer writes it in rounds: _delta_log/
// prepared, two data files owed (one in a new partition directory), the
// first commit. The data files wait for no round; the commit's round before
// its publish makes them, their names and every directory they created
// durable before the commit names them, and the whole commit costs the
// commit's two rounds. Per file an owed put is a Put: durable when it
// returns.
func TestFile_PowerLoss_OwedDataFilesThenTheFirstCommit_TheCommitsRoundMakesThemDurableBeforeItPublishes(t *testing.T) {
	t.Parallel()
	for _, mode := range []FileSync{SyncPerFile, SyncGroup, SyncAuto} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, err := NewFile(t.TempDir(), WithSync(mode), withKernel("6.1.0-13-amd64"))
			require.NoError(t, err)
			m := newPowerLoss(t, f)
			inRounds := f.group != nil
			var rounds *atomic.Int32
			if inRounds {
				rounds = countRounds(f)
			}
			data := []string{"T/bronze/events/part-0.parquet", "T/bronze/events/day=2026-12-04/part-1.parquet"}
			checked := checkOwedAtPublish(t, f, m, data...)

			require.NoError(t, PrepareDir(ctx, f, "T/bronze/events/_delta_log"))
			for _, k := range data {
				putOwedKey(t, f, k)
				if inRounds {
					require.False(t, m.survives(k), "in rounds an owed put flushes nothing itself")
				} else {
					m.requireSurvives(t, k)
				}
			}
			if inRounds {
				require.Zero(t, rounds.Load(), "owed puts waited for a round")
			}
			require.NoError(t, f.PutIfAbsent(ctx, "T/bronze/events/_delta_log/0.json", []byte("v0")))
			require.Equal(t, int32(1), checked.Load())
			for _, k := range append(data, "T/bronze/events/_delta_log/0.json") {
				m.requireSurvives(t, k)
			}
			if inRounds {
				require.Equal(t, int32(2), rounds.Load(), "the table's first commit costs the commit's two rounds")
			}
			require.Zero(t, creationsBelow(f.root), "every directory the owed puts created ended with the commit's round")
		})
	}
}

// sync=auto goes per file between a table's data file (owed, in rounds)
// and its commit: the per-file commit's own fsyncs do not flush the data
// file, so before publishing it waits for a round that covers it. The next
// per-file write, with nothing new owed, runs no round.
func TestFileAuto_PowerLoss_OwedInRoundsThenThePerFileCommit_WaitsForARoundBeforePublishing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, m := newAutoPowerLoss(t)
	putKey(t, f, "t/part-0.parquet") // t exists and is durable
	rounds := countRounds(f)
	checked := checkOwedAtPublish(t, f, m, "t/part-1.parquet")

	putOwedKey(t, f, "t/part-1.parquet")
	require.False(t, m.survives("t/part-1.parquet"))
	goPerFile(f)
	require.Equal(t, SyncPerFile, f.SyncInEffect())

	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	require.Equal(t, int32(1), checked.Load())
	m.requireSurvives(t, "t/part-1.parquet")
	m.requireSurvives(t, "t/_delta_log/0.json")
	require.Equal(t, int32(1), rounds.Load(), "the per-file commit waited for one round for the owed data file")

	// Per file from now on: an owed put is a Put, and nothing is owed.
	putOwedKey(t, f, "t/part-2.parquet")
	m.requireSurvives(t, "t/part-2.parquet")
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/1.json", []byte("v1")))
	require.Equal(t, int32(1), rounds.Load(), "nothing was owed: no round")
	require.Zero(t, creationsBelow(f.root))
}

// The round a commit waits for fails (a write-back error): the commit
// publishes nothing, whether its put is in rounds or per file, and a retry
// after the disk recovered settles the data file and commits.
func TestFile_OwedDataFile_TheCommitsRoundFails_NothingPublishedAndTheRetryCommits(t *testing.T) {
	t.Parallel()
	for _, perFileCommit := range []bool{false, true} {
		name := "commit-in-rounds"
		if perFileCommit {
			name = "commit-per-file"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, m := newAutoPowerLoss(t)
			var failing atomic.Bool
			round := f.group.round
			f.group.round = func() error {
				if failing.Load() {
					return errors.New("syncfs: input/output error")
				}
				return round()
			}
			putKey(t, f, "t/part-0.parquet")
			putOwedKey(t, f, "t/part-1.parquet")
			if perFileCommit {
				goPerFile(f)
			}
			failing.Store(true)
			err := f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0"))
			require.ErrorContains(t, err, "input/output error")
			_, err = f.Stat(ctx, "t/_delta_log/0.json")
			require.ErrorIs(t, err, ErrNotFound, "a commit whose owed data file is not known durable must not be published")

			failing.Store(false)
			require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
			m.requireSurvives(t, "t/part-1.parquet")
			m.requireSurvives(t, "t/_delta_log/0.json")
		})
	}
}

// Through a store scoped to a table (Sub, as the Delta writer holds one),
// an owed put is the root store's: the commit through the same scoped
// store covers it.
func TestFileGroup_OwedPutThroughASubStore_TheCommitCoversIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	m := newPowerLoss(t, f)
	rounds := countRounds(f)
	sub, err := Sub(f, "T/silver/claims")
	require.NoError(t, err)
	require.NoError(t, PutOwed(ctx, sub, "part-0.parquet", strings.NewReader("rows"), 4))
	require.Zero(t, rounds.Load())
	require.False(t, m.survives("T/silver/claims/part-0.parquet"))
	require.NoError(t, sub.PutIfAbsent(ctx, "_delta_log/0.json", []byte("v0")))
	m.requireSurvives(t, "T/silver/claims/part-0.parquet")
	m.requireSurvives(t, "T/silver/claims/_delta_log/0.json")
	require.Equal(t, int32(2), rounds.Load())
	require.Zero(t, creationsBelow(f.root))
}

// A round covers the owed puts counted when it started, not those that
// finished while it ran: a data file put while a round is flushing may have
// been renamed after the round took its pages, so a per-file commit that
// follows waits for the next round.
func TestFileAuto_PowerLoss_OwedPutWhileARoundRuns_ThatRoundDoesNotCoverIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, m := newAutoPowerLoss(t)
	putKey(t, f, "t/part-0.parquet")
	checked := checkOwedAtPublish(t, f, m, "t/part-1.parquet")

	in, release := m.holdRounds(2)
	in1, release1, in2, release2 := in[0], release[0], in[1], release[1]
	other := putAsync(ctx, f, "u/other") // in rounds: its two rounds are 1 and 2
	<-in1
	putOwedKey(t, f, "t/part-1.parquet") // while round 1 flushes
	goPerFile(f)
	close(release1)
	<-in2 // round 2 runs, after round 1 ended

	commit := make(chan error, 1)
	go func() { commit <- f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")) }()
	select {
	case err := <-commit:
		t.Fatalf("the per-file commit returned (%v) while the owed data file was covered by no finished round", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Zero(t, checked.Load(), "the commit published before a round covered its data file")
	close(release2)
	require.NoError(t, <-commit)
	require.NoError(t, <-other)
	require.Equal(t, int32(1), checked.Load())
	m.requireSurvives(t, "t/part-1.parquet")
	m.requireSurvives(t, "t/_delta_log/0.json")
}

package store

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// sync=auto (SyncAuto, the lake URL's default): group rounds where they are
// safe and fast, per-file fsyncs where they are not.
//
// Rounds are used only on Linux 5.8 or later: before it syncfs(2) reports
// no write-back error, so a failing disk would go unnoticed by every put
// (on an older kernel, or one whose version cannot be read, the store is
// per file for good). They are dropped while they are slow: a syncfs
// flushes everything dirty on the filesystem, so another program writing
// heavily to it stretches every round (group mode was up to 4x slower
// than per file then, docs/object-stores.md). What a round costs is
// compared with what per-file fsyncs would cost for the steps it served:
// rounds cost their time over the steps (waiters) they served, both
// summed with exponential decay (autoEWMA), so a round serving many
// weighs as many; an fsync of d while k fsyncs were in flight (itself
// included) costs about d/k of the device (they queue on it), smoothed
// too. The first round of a phase is not counted: it writes back
// everything the filesystem's other writers dirtied while no round ran
// (after a drain started or while the store was per file), and on a busy
// machine it took up to a second for one waiter where the next took a
// few milliseconds for thirty. When a wait for a round costs
// autoSlowFactor times what autoFsyncsPerWait fsyncs do (the fsyncs a
// commit makes per file for each round it waits for in rounds), after
// autoMinRounds counted rounds of the phase, the store
// goes per file and tries rounds again
// after a backoff, doubled each time a retry falls back soon (within
// autoBackoffMax of the retry), reset after a phase of rounds that lasted
// longer; the retry starts when a caller sizes its concurrency
// (useGroup). Before any fsync was measured the fsync cost is
// autoFileCostPrior.
//
// Safety of switching: a put chooses its protocol once, when its
// temporary file is written (flushWritten), and follows it to the end;
// every fsync point of file.go's header holds for each put in its own
// protocol. The one thing puts share across protocols is a directory
// another put created: its creation stays registered until it is durable
// in its parent (per file after the parent's fsync, in group mode after
// the round that started after the mkdir, putSync.createdDirs), and every
// put of either protocol waits for the registered creations on its path
// before publishing (awaitDirs). So a per-file put never publishes below a
// directory whose group round has not run yet.
//
// The mode in effect is what the next put will do (File.SyncInEffect), and
// the store's concurrency follows it (File.Concurrency): the lake writer
// asks once per batch.
//
// Rejected: deciding once at open (a foreign writer starts and stops at
// any time); a timer or goroutine probing the disk (rounds and fsyncs that
// happen anyway are the measurements, and they cost nothing extra).
// autoSlowFactor is 6, not 2: an fsync's latency over its queue
// understates what per-file flushing costs (each fsync is a device flush
// of its own, and on a VM an exit to the host), and at 2 a quiet
// 10,000-tenant drain left rounds for most of its writes (up to 12x the
// device flushes, 1.4-1.7x the wall time of sync=group); a foreign writer
// stretching rounds to seconds still passes 6 by far.
//
// autoFsyncsPerWait weighs the two kinds of step by what a table commit
// makes of each: per file four fsyncs (the data file and its directory,
// the commit file and the log directory, file.go's 1 and 3 twice), in
// rounds two waits (the commit's round before publishing and its round
// after; the data file is owed and waits for none, owed.go). Compared
// step for step (before session 22), a wait could cost at most six times
// an fsync, which per commit is only three times what per-file flushing
// costs (two waits against four fsyncs), not autoSlowFactor: at the lake
// writer's steady state over 10,000 tenants (BenchmarkFrontierLag, 2,000
// events/s, PostgreSQL on the same disk) rounds at 1.7 ms a wait against
// fsyncs at 0.25 ms over their queue (6.7 times) sent the store per file,
// where its batches then took 1.7-2.9 ms a table commit against 0.9-1.5
// ms in rounds (docs/lake-writer.md, session 22).
const (
	autoSlowFactor    = 6
	autoFsyncsPerWait = 2
	autoMinRounds     = 8
	autoFileCostPrior = time.Millisecond
	autoBackoffMin    = time.Second
	autoBackoffMax    = 30 * time.Second
	autoEWMA          = 8 // each sample moves the average by an eighth of the difference
)

// autoSync decides, put by put, whether a sync=auto store uses its group
// rounds.
type autoSync struct {
	now func() time.Time // time.Now unless a test replaces it

	mu         sync.Mutex
	group      bool          // the mode in effect: rounds (true) or per-file fsyncs
	since      time.Time     // when the mode in effect began
	retryAt    time.Time     // per file: when to try rounds again
	backoff    time.Duration // the next wait before retrying rounds
	roundTime  float64       // decayed sum of the counted rounds' durations (ns), this phase
	roundSteps float64       // decayed sum of the steps they served
	rounds     int           // rounds seen in this phase of rounds, the first included
	fileCost   time.Duration // smoothed cost of an fsync, over its queue
	fileMeasd  bool          // fileCost is a measurement, not the prior
	fallbacks  int           // times the store went per file (tests, status)
	inflight   atomic.Int64  // fsyncs running now
	fsyncsSeen atomic.Int64  // fsyncs measured (tests)
}

func newAutoSync() *autoSync {
	return &autoSync{now: time.Now, group: true, backoff: autoBackoffMin, fileCost: autoFileCostPrior}
}

// useGroup reports whether the next put uses rounds (sizing: whether the
// caller should size its concurrency for them), and starts a retry of
// rounds once the backoff has passed, when asked by a caller sizing its
// concurrency (File.Concurrency), or autoBackoffMax after the fallback
// when asked by a put: rounds are judged at the concurrency they are
// meant for. Judged at the 4 commits at once of a per-file batch, rounds
// serving 2-5 writes each cost twice what fsyncs did on a busy machine,
// and every retry failed; the lake writer sizes each batch, so its
// retries start with a batch of FileGroupConcurrency commits.
func (a *autoSync) useGroup(sizing bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	due := a.retryAt
	if !sizing {
		due = a.since.Add(max(a.retryAt.Sub(a.since), autoBackoffMax))
	}
	if !a.group && !a.now().Before(due) {
		a.group, a.since, a.rounds, a.roundTime, a.roundSteps = true, a.now(), 0, 0, 0
	}
	return a.group
}

// round runs one group round that serves waiters steps and takes in its
// cost.
func (a *autoSync) round(waiters int, run func() error) error {
	start := a.now()
	err := run()
	a.roundDone(a.now().Sub(start), waiters)
	return err
}

// roundDone takes in a round that lasted d and served waiters steps, and
// goes per file when rounds have become slow.
func (a *autoSync) roundDone(d time.Duration, waiters int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.group {
		return // a round of puts that chose rounds before the switch
	}
	a.rounds++
	if a.rounds == 1 {
		return // the phase's first round: the backlog of other writers
	}
	a.roundTime += float64(d) - a.roundTime/autoEWMA
	a.roundSteps += float64(max(waiters, 1)) - a.roundSteps/autoEWMA
	if a.rounds <= autoMinRounds || a.roundCost() <= autoSlowFactor*autoFsyncsPerWait*a.fileCost {
		return
	}
	now := a.now()
	if now.Sub(a.since) >= autoBackoffMax {
		a.backoff = autoBackoffMin // rounds served well for a long time
	}
	a.group, a.since, a.retryAt = false, now, now.Add(a.backoff)
	a.backoff = min(2*a.backoff, autoBackoffMax)
	a.fallbacks++
}

// roundCost is what a counted round of this phase cost per step served.
func (a *autoSync) roundCost() time.Duration {
	if a.roundSteps == 0 {
		return 0
	}
	return time.Duration(a.roundTime / a.roundSteps)
}

// fallbackCount is how many times the store went per file.
func (a *autoSync) fallbackCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fallbacks
}

// fsync runs one fsync and takes in its cost.
func (a *autoSync) fsync(run func() error) error {
	k := a.inflight.Add(1)
	start := a.now()
	err := run()
	d := a.now().Sub(start)
	a.inflight.Add(-1)
	a.fsyncsSeen.Add(1)
	a.fsyncDone(d, k)
	return err
}

func (a *autoSync) fsyncDone(d time.Duration, inflight int64) {
	sample := d / time.Duration(max(inflight, 1))
	a.mu.Lock()
	a.fileCost = smooth(a.fileCost, sample, !a.fileMeasd)
	a.fileMeasd = true
	a.mu.Unlock()
}

// smooth is the exponentially weighted average of avg and sample (sample
// alone when first).
func smooth(avg, sample time.Duration, first bool) time.Duration {
	if first {
		return sample
	}
	return avg + (sample-avg)/autoEWMA
}

// syncfsReportsErrors reports whether a Linux release (uname -r, "6.1.0-13-amd64")
// is 5.8 or later, where syncfs(2) returns write-back errors. A release
// that cannot be read counts as older.
func syncfsReportsErrors(release string) bool {
	majorS, rest, _ := strings.Cut(release, ".")
	major, err := strconv.Atoi(majorS)
	if err != nil {
		return false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	minor, err := strconv.Atoi(rest[:end])
	if err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
}

// kernelRelease is the running kernel's release (uname -r), "" when it
// cannot be read.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// groupNow is the group rounds the next put uses, nil when it syncs per
// file: always in group mode, while rounds are in effect in auto mode.
func (f *File) groupNow() *groupSync { return f.groupFor(false) }

// groupFor is groupNow for a put (sizing false) or for a caller sizing
// its concurrency (autoSync.useGroup).
func (f *File) groupFor(sizing bool) *groupSync {
	if f.group == nil || f.auto != nil && !f.auto.useGroup(sizing) {
		return nil
	}
	return f.group
}

// timedFsync runs a per-file fsync, measured in auto mode.
func (f *File) timedFsync(run func() error) error {
	if f.auto == nil {
		return run()
	}
	return f.auto.fsync(run)
}

// SyncInEffect is how the next write will be flushed: SyncGroup or
// SyncPerFile (in auto mode, what it uses at the moment; a file on another
// filesystem than the root's is flushed per file in any mode).
func (f *File) SyncInEffect() FileSync { return f.syncFor(false) }

func (f *File) syncFor(sizing bool) FileSync {
	if f.groupFor(sizing) != nil {
		return SyncGroup
	}
	return SyncPerFile
}

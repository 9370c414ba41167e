package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// A power-loss model of a file store's directory entries, to check the
// directory cache (dircache.go) against what durability needs rather than
// against call counts: an entry (a directory's or a file's name in its
// parent) survives a power loss only if a flush that covers it started
// after it appeared, an fsync of its parent or a syncfs round. At every
// acknowledgement, each name on the key's path must have survived.
//
// The model sees the flushes through the store's fault-injection hooks
// (dirFsync, the group's round) and takes, when each one starts, the
// names it will flush: the parent's entries, or every entry below the
// root for a round. The test plays the other process that removes
// directories (lose forgets what was flushed below them) or makes one
// just before the store's own os.Mkdir (beforeMkdir).
type powerLoss struct {
	root    string
	mu      sync.Mutex
	durable map[string]bool // names below root whose entry a finished flush covered
	// inRound, when set, runs in each round after the round has taken the
	// names it flushes (a test pauses a round there).
	inRound func()
}

func newPowerLoss(t *testing.T, f *File) *powerLoss {
	t.Helper()
	m := &powerLoss{root: f.root, durable: map[string]bool{}}
	f.dirFsync = func(dir string) error {
		names := m.entries(dir, false)
		if err := fsyncDir(dir); err != nil {
			return err
		}
		m.flushed(names)
		return nil
	}
	if f.group != nil {
		// A stand-in for syncfs: a test must not flush the machine's disks.
		f.group.round = func() error {
			names := m.entries(m.root, true)
			if m.inRound != nil {
				m.inRound()
			}
			m.flushed(names)
			return nil
		}
	}
	return m
}

// entries lists the names in dir (all below it when deep), the ones a
// flush of dir (a round) starting now makes durable.
func (m *powerLoss) entries(dir string, deep bool) []string {
	var names []string
	if !deep {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			names = append(names, filepath.Join(dir, de.Name()))
		}
		return names
	}
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return nil
	})
	return names
}

func (m *powerLoss) flushed(names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		m.durable[n] = true
	}
}

// lose removes dir as another process would: what was flushed below it
// (and dir's own entry) is gone with it.
func (m *powerLoss) lose(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(m.root, filepath.FromSlash(dir))
	require.NoError(t, os.RemoveAll(p))
	m.mu.Lock()
	defer m.mu.Unlock()
	for n := range m.durable {
		if n == p || strings.HasPrefix(n, p+string(os.PathSeparator)) {
			delete(m.durable, n)
		}
	}
}

// requireSurvives fails unless every name on key's path, key included,
// would survive a power loss now.
func (m *powerLoss) requireSurvives(t *testing.T, key string) {
	t.Helper()
	if p := m.lost(key); p != "" {
		require.Fail(t, "lost at acknowledgement", "%s was acknowledged, but a power loss now drops %s: no flush that started after it appeared covered its entry", key, p)
	}
}

// lost is the first name on key's path, from the root down, that a power
// loss now would drop ("" when none).
func (m *powerLoss) lost(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.root
	for _, part := range strings.Split(key, "/") {
		p = filepath.Join(p, part)
		if !m.durable[p] {
			return p
		}
	}
	return ""
}

// newTable is what the Delta writer does with a new table: prepare
// _delta_log/, put the first data file, commit; each acknowledgement must
// survive.
func (m *powerLoss) newTable(t *testing.T, f *File, table string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, PrepareDir(ctx, f, table+"/_delta_log"))
	putKey(t, f, table+"/part-0.parquet")
	m.requireSurvives(t, table+"/part-0.parquet")
	require.NoError(t, f.PutIfAbsent(ctx, table+"/_delta_log/0.json", []byte("v0")))
	m.requireSurvives(t, table+"/_delta_log/0.json")
}

// Every way the cache can be wrong about a directory, in each sync mode:
// it vanished (a cached tenant, a prepared table before its first write),
// or another process made it between the write's failed open and its own
// os.Mkdir (EEXIST, which fsyncs the parent per file). None may leave an
// acknowledged object on an entry a power loss drops.
func TestFile_PowerLossAtEveryAcknowledgement_CachedDirectoriesThatVanishedOrAnotherProcessMade_EveryNameOnThePathSurvives(t *testing.T) {
	t.Parallel()
	for _, mode := range []FileSync{SyncPerFile, SyncGroup} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, err := NewFile(t.TempDir(), WithSync(mode))
			require.NoError(t, err)
			m := newPowerLoss(t, f)
			var raced atomic.Value // the directory another process makes before the store's os.Mkdir
			raced.Store("")
			f.beforeMkdir = func(dir string) {
				if dir == raced.Load().(string) {
					require.NoError(t, os.Mkdir(dir, 0o755))
				}
			}

			// A tenant's tables; the second and third start below the
			// cached tenant directory.
			for _, table := range []string{"T/bronze/events", "T/silver/claims", "T/gold/lineage"} {
				m.newTable(t, f, table)
			}
			// The cached tenant vanishes: its next tables recreate it.
			m.lose(t, "T")
			require.True(t, knownDirs.has(filepath.Join(f.root, "T", "bronze", "events")), "the test needs the vanished directories cached")
			m.newTable(t, f, "T/bronze/events")
			m.newTable(t, f, "T/silver/claims")
			// Only a cached leaf vanishes, its parent stays.
			m.lose(t, "T/silver/claims")
			m.newTable(t, f, "T/silver/claims")

			// A prepared table vanishes before its first write: PrepareDir
			// believed the cache, the data file recreates the table.
			require.NoError(t, PrepareDir(ctx, f, "P/bronze/events/_delta_log"))
			m.lose(t, "P")
			m.newTable(t, f, "P/bronze/events")
			require.NoError(t, PrepareDir(ctx, f, "Q/bronze/events/_delta_log"))
			m.lose(t, "Q/bronze")
			m.newTable(t, f, "Q/bronze/events")

			// Another process makes a new tenant's directory between this
			// write's failed open and its os.Mkdir.
			raced.Store(filepath.Join(f.root, "R"))
			m.newTable(t, f, "R/bronze/events")
			// The same after the tenant was cached and vanished: the stale
			// ancestor costs one failed os.Mkdir, then EEXIST on the tenant.
			m.lose(t, "R")
			m.newTable(t, f, "R/bronze/events")

			require.Zero(t, creationsBelow(f.root))
		})
	}
}

// A directory prepared on another filesystem below the root (a symbolic
// link to /dev/shm) is not flushed by the root's syncfs: a round of a put
// elsewhere must not end its owed creation (healPath goes only by the
// put's own path, which fstat put on the root's filesystem), so the first
// write below it still fsyncs its parent.
func TestFileGroup_PreparedDirectoryOnAnotherFilesystem_IsNotEndedByARoundOfTheRootsFilesystem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	other, err := os.MkdirTemp("/dev/shm", "oml-dircache-")
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
	ctx := context.Background()
	f, err := NewFile(root, WithSync(SyncGroup))
	require.NoError(t, err)
	f.group.round = func() error { return nil }
	syncs := countNewDirSyncs(f)

	require.NoError(t, PrepareDir(ctx, f, "elsewhere/t/_delta_log"))
	putKey(t, f, "here/x") // a round, on the root's filesystem
	require.Equal(t, 2, creationsBelow(root), "a round of the root's filesystem ended creations on another one")
	require.NoError(t, f.PutIfAbsent(ctx, "elsewhere/t/_delta_log/0.json", []byte("v0")))
	require.Equal(t, 1, syncs(filepath.Join(root, "elsewhere", "t")), "t's entry in the other filesystem was never fsynced")
	require.Equal(t, 1, syncs(filepath.Join(root, "elsewhere", "t", "_delta_log")))
	require.Zero(t, creationsBelow(root))
}

// A directory prepared off the path of every put in rounds stays owed
// (no stat tells its filesystem), and the first write below it makes it
// durable before publishing.
func TestFileGroup_PreparedDirectoryOffEveryPutsPath_StaysOwedUntilTheFirstWriteBelowItMakesItDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	m := newPowerLoss(t, f)
	putKey(t, f, "a/x")
	require.NoError(t, PrepareDir(ctx, f, "a/b/_delta_log"))
	putKey(t, f, "c/y") // its round flushed a/b too, but c's path does not say so
	require.Equal(t, 2, creationsBelow(f.root), "a/b and a/b/_delta_log, off c/y's path, were ended")
	require.NoError(t, f.PutIfAbsent(ctx, "a/b/_delta_log/0.json", []byte("v0")))
	m.requireSurvives(t, "a/b/_delta_log/0.json")
	require.Zero(t, creationsBelow(f.root))
}

// sync=auto mixes the protocols: a round that was already running when a
// directory was prepared did not flush its entry, so the put it served
// must not end that creation (healPath's mkdirSeq check), or a per-file
// write below the directory before the next round would take it as
// durable and acknowledge on an entry a power loss drops.
func TestFileAuto_PowerLoss_ARoundThatStartedBeforeADirectoryWasPrepared_APerFileWriteBelowItStillFsyncsItsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, m := newAutoPowerLoss(t)
	putKey(t, f, "t/part-0.parquet") // t exists and is durable
	m.requireSurvives(t, "t/part-0.parquet")

	// The next put's round before publishing runs while t/_delta_log is
	// prepared; its round after publishing is held while a per-file write
	// goes into t/_delta_log.
	in, release := m.holdRounds(2)
	in1, release1, in2, release2 := in[0], release[0], in[1], release[1]
	done := putAsync(ctx, f, "t/part-1.parquet")
	<-in1
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	close(release1)
	<-in2

	goPerFile(f) // rounds fall back to per-file fsyncs
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	m.requireSurvives(t, "t/_delta_log/0.json")
	close(release2)
	require.NoError(t, <-done)
	require.Zero(t, creationsBelow(f.root))
}

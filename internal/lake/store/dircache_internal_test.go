package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// The directory cache (dircache.go) saves the calls that find a directory,
// never an fsync: a cached directory that vanished is recreated and made
// durable again, and a new directory below a cached one is fsynced into it
// as any other.

// putKey puts key (its name as the body) and requires it to read back.
func putKey(t *testing.T, f *File, key string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.Put(ctx, key, bytes.NewReader([]byte(key)), int64(len(key))))
	got, err := f.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, key, string(got))
}

// creationsBelow is how many creations under root are still registered:
// zero once every directory the writes made is durable.
func creationsBelow(root string) int {
	creations.Lock()
	defer creations.Unlock()
	n := 0
	for d := range creations.m {
		if strings.HasPrefix(d, root+string(os.PathSeparator)) {
			n++
		}
	}
	return n
}

func TestFile_CachedDirectoryRemovedByAnotherProcess_PutRecreatesItAndIsDurable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f)
	putKey(t, f, "a/b/c/x")
	leaf := filepath.Join(root, "a", "b", "c")
	require.True(t, knownDirs.has(leaf))

	require.NoError(t, os.RemoveAll(filepath.Join(root, "a"))) // the other process
	putKey(t, f, "a/b/c/y")
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		require.Equal(t, 2, syncs(filepath.Join(root, d)), "%s was recreated without an fsync into its parent", d)
	}
	require.Zero(t, creationsBelow(root))
}

func TestFile_CachedAncestorRemovedByAnotherProcess_ADirectoryBelowItRecreatesTheChainAndFsyncsEachLevel(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f)
	putKey(t, f, "a/b/x")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "a")))
	putKey(t, f, "a/c/y") // a/c was never made; its cached parent a is gone
	require.Equal(t, 2, syncs(filepath.Join(root, "a")))
	require.Equal(t, 1, syncs(filepath.Join(root, "a", "c")))
	require.Zero(t, creationsBelow(root))
}

// PrepareDir trusts the cache (it is a hint: the first write below pays
// the fsyncs); a prepared directory that vanished is recreated by the
// writes, each level fsynced into its parent.
func TestFile_PreparedDirectoryRemovedByAnotherProcess_TheTableWritesRecreateItDurably(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f)
	table := func(v string) {
		require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
		putKey(t, f, "t/part-"+v+".parquet")
		require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/"+v+".json", []byte(v)))
	}
	table("0")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "t")))
	table("1")
	require.Equal(t, 2, syncs(filepath.Join(root, "t")), "t's entry in the root, once per creation")
	// The first time the data file's fsync of t carried it; the second
	// time the commit recreated it (PrepareDir believed it there) and
	// fsynced t for it.
	require.Equal(t, 1, syncs(filepath.Join(root, "t", "_delta_log")))
	require.Zero(t, creationsBelow(root))
}

// The second table of a tenant starts below the tenant's directory: it
// neither re-creates it (an os.Mkdir that failed with EEXIST counted as a
// creation another process might not have fsynced) nor fsyncs the lake
// root for it again.
func TestFile_SecondTableOfATenant_DoesNotFsyncTheTenantDirectoryAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f)
	for _, table := range []string{"T/bronze/events", "T/silver/claims", "T/gold/lineage"} {
		require.NoError(t, PrepareDir(ctx, f, table+"/_delta_log"))
		putKey(t, f, table+"/part-0.parquet")
		require.NoError(t, f.PutIfAbsent(ctx, table+"/_delta_log/0.json", []byte("v0")))
		require.Equal(t, 1, syncs(filepath.Join(root, table)))
	}
	require.Equal(t, 1, syncs(filepath.Join(root, "T")))
	require.Zero(t, creationsBelow(root))
}

// The cache knows a directory from the moment its os.Mkdir returned, long
// before its creator's fsync of the parent: a write into it must still
// wait for that fsync (the registry, not the cache, says durable).
func TestFile_CachedDirectoryStillBeingCreated_AWriteIntoItWaitsForItsFsync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	dir := filepath.Join(root, "d")
	paused, release := make(chan struct{}), make(chan struct{})
	f.beforeSyncNewDir = func(d string) error {
		if d == dir {
			close(paused)
			<-release
		}
		return nil
	}
	waiting := make(chan string, 1)
	f.waitingForDir = func(d string) { waiting <- d }
	aDone := make(chan error, 1)
	go func() { aDone <- f.PutIfAbsent(ctx, "d/a", []byte("a")) }()
	<-paused
	require.True(t, knownDirs.has(dir), "the test needs the directory cached")
	bDone := putAsync(ctx, f, "d/b")
	select {
	case err := <-bDone:
		t.Fatalf("a put into a cached directory still being created returned (%v) before its creator's fsync", err)
	case d := <-waiting:
		require.Equal(t, dir, d)
	}
	requireRunning(t, bDone, "a put into a cached directory still being created")
	close(release)
	require.NoError(t, <-aDone)
	require.NoError(t, <-bDone)
}

// Group rounds: a table's directories prepared before its first data file
// are ended by that file's round (healPath), with no stat and no extra
// round; the same after the cached directories vanished.
func TestFileGroup_CachedTableDirectoriesRemoved_TheNextTableWritesRecreateThemInTheirRounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	var rounds atomic.Int32
	f.group.round = func() error { rounds.Add(1); return nil }
	for v := range 2 {
		require.NoError(t, PrepareDir(ctx, f, "T/t/_delta_log"))
		putKey(t, f, "T/t/part-"+string(rune('0'+v))+".parquet")
		require.NoError(t, f.PutIfAbsent(ctx, "T/t/_delta_log/"+string(rune('0'+v))+".json", []byte("v")))
		require.Zero(t, creationsBelow(f.root))
		require.NoError(t, os.RemoveAll(filepath.Join(f.root, "T")))
	}
	require.Equal(t, int32(8), rounds.Load(), "two tables, two puts each, two rounds a put")
}

func TestDirCache_IsBoundedAndKeepsWhatIsUsed(t *testing.T) {
	t.Parallel()
	c := dirCache{seed: knownDirs.seed, cur: map[uint64]struct{}{}}
	c.add("/r", "/r/hot")
	for i := range 3 * knownDirsGeneration {
		c.add("/r", filepath.Join("/r", "d", string(rune('a'+i%26)), filepath.Base(t.Name())+string(rune(i))))
		if i%1000 == 0 {
			require.True(t, c.has("/r/hot"))
		}
	}
	require.LessOrEqual(t, len(c.cur)+len(c.old), 2*knownDirsGeneration)
	require.True(t, c.has("/r/hot"))
	require.Equal(t, "/r/hot", c.knownAncestor("/r", "/r/hot/x/y"))
	c.drop("/r/hot")
	require.False(t, c.has("/r/hot"))
	require.Empty(t, c.knownAncestor("/r", "/r"))
}

// healPath ends only creations whose entries live on the put's own path:
// that path's device is what the put checked (its temporary file's
// fstat); a directory prepared elsewhere waits for a write below it.
func TestFileGroup_APutsRound_EndsOnlyThePreparedDirectoriesOnItsPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	f.group.round = func() error { return nil }
	require.NoError(t, PrepareDir(ctx, f, "a/_delta_log"))
	putKey(t, f, "b/x")
	// a's entry is in the root, on b/x's path: ended; a/_delta_log's is
	// in a, off it: still owed.
	require.Equal(t, 1, creationsBelow(f.root), "a/_delta_log ended by a round of a put into b")
	putKey(t, f, "a/part-0.parquet")
	require.Zero(t, creationsBelow(f.root))
}

// A round that was already running when a directory was prepared may have
// missed its entry: the put it served must not end that creation.
func TestFileGroup_ARoundThatStartedBeforeADirectoryWasPrepared_DoesNotEndItsCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	require.NoError(t, err)
	putKey(t, f, "t/part-0.parquet") // t exists and is durable
	inRound, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	f.group.round = func() error {
		if n.Add(1) == 1 {
			close(inRound)
			<-release
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- f.Put(ctx, "t/part-1.parquet", bytes.NewReader([]byte("x")), 1) }()
	<-inRound
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, 1, creationsBelow(f.root), "t/_delta_log ended by a round that started before its mkdir")
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	require.Zero(t, creationsBelow(f.root))
}

// A directory found missing is forgotten in both generations: one left in
// the old one would be taken as known again on its next lookup.
func TestDirCache_DropForgetsAnEntryInEitherGeneration(t *testing.T) {
	t.Parallel()
	c := dirCache{seed: knownDirs.seed, cur: map[uint64]struct{}{}}
	c.add("/r", "/r/gone")
	c.old, c.cur = c.cur, map[uint64]struct{}{} // a generation later
	c.drop("/r/gone")
	require.False(t, c.has("/r/gone"))
	require.Equal(t, "/r", c.knownAncestor("/r", "/r/gone/x"), "the root, added with it, is still known")
}

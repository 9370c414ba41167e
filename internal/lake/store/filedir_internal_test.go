package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// mkdirAll's own contract, with the steps a write takes after it
// (mkdirAllSynced): the directory is durable only once they return, also
// when another write of this process is still creating it.

// mkdirAllSynced is what a write does with a directory it finds missing:
// create it and its parents, fsync those it created into their parents,
// and wait for those other writes are still creating.
func (f *File) mkdirAllSynced(ctx context.Context, dir string) error {
	var made []newDir
	err := f.mkdirAll(ctx, dir, &made)
	if serr := f.syncNewDirs(made); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	return f.awaitDirs(ctx, dir, nil)
}

// awaitMkdirAll runs f.mkdirAllSynced(dir) and requires that it waits for dir
// (and has not returned) before release is called.
func awaitMkdirAll(t *testing.T, f *File, dir string, waiting chan string, release func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.mkdirAllSynced(context.Background(), dir) }()
	select {
	case err := <-done:
		t.Fatalf("mkdirAll(%s) returned (%v) while another write's creation of it is in flight", dir, err)
	case got := <-waiting:
		require.Equal(t, dir, got)
	}
	release()
	require.NoError(t, <-done)
}

func TestMkdirAllOfADirectoryThatExistsButIsStillBeingCreatedWaits(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	f := &File{root: root}
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
	go func() { aDone <- f.Put(context.Background(), "d/x", nil, 0) }()
	<-paused
	awaitMkdirAll(t, f, dir, waiting, func() { close(release) })
	require.NoError(t, <-aDone)
}

// claimedByAnotherWrite returns a store whose directory dir another write
// (the test, holding c) has registered as being created, and the channel
// on which the store reports waiting for it.
func claimedByAnotherWrite(t *testing.T) (f *File, dir string, c *dirCreation, waiting chan string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "d")
	f = &File{root: root}
	waiting = make(chan string, 1)
	f.waitingForDir = func(d string) { waiting <- d }
	c, mine := claimDir(dir)
	require.True(t, mine)
	return f, dir, c, waiting
}

// The creation is registered but os.Mkdir has not run yet: mkdirAll finds
// the directory missing, and must not create it itself or give up.
func TestMkdirAllOfADirectoryAnotherWriteIsAboutToCreateWaits(t *testing.T) {
	t.Parallel()
	f, dir, c, waiting := claimedByAnotherWrite(t)
	awaitMkdirAll(t, f, dir, waiting, func() {
		require.NoError(t, os.Mkdir(dir, 0o755))
		finishDir(dir, c, nil)
	})
	require.DirExists(t, dir)
}

// The write mkdirAll waited for failed to create the directory (its
// os.Mkdir failed): mkdirAll creates it itself instead of reporting done.
func TestMkdirAllCreatesTheDirectoryItselfWhenTheWriteItWaitedForFailedToCreateIt(t *testing.T) {
	t.Parallel()
	f, dir, c, waiting := claimedByAnotherWrite(t)
	awaitMkdirAll(t, f, dir, waiting, func() { finishDir(dir, c, nil) })
	require.DirExists(t, dir)
}

// Another process created the directory between mkdirAll's stat and its
// os.Mkdir (EEXIST), and may not have fsynced the parent yet: mkdir
// fsyncs it itself rather than taking the directory as durable.
func TestMkdirOfADirectoryAnotherProcessJustCreatedFsyncsItsParent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	f := &File{root: root}
	var synced []string
	f.beforeSyncNewDir = func(d string) error { synced = append(synced, d); return nil }
	require.NoError(t, os.Mkdir(dir, 0o755)) // the other process
	require.NoError(t, f.mkdirAllSynced(context.Background(), dir))
	require.Equal(t, []string{dir}, synced)
}

// BenchmarkAwaitDirsNothingInFlight is the fence's cost in the common case,
// paid by every write: no creation registered in the process.
func BenchmarkAwaitDirsNothingInFlight(b *testing.B) {
	f := &File{root: b.TempDir()}
	dir := filepath.Join(f.root, "tenant", "bronze", "events", "_delta_log")
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if err := f.awaitDirs(ctx, dir, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// PrepareDir leaves the new directories' parent fsyncs owed. The first
// write below one pays them before it publishes; a later fsync of the
// parent pays them only if it started after the os.Mkdir.

// countNewDirSyncs records, per directory, the fsyncs of its parent that
// f runs for its creation (tries included); failing names the ones whose
// fsync fails.
func countNewDirSyncs(f *File, failing ...string) func(dir string) int {
	var mu sync.Mutex
	n := map[string]int{}
	f.beforeSyncNewDir = func(d string) error {
		mu.Lock()
		n[d]++
		mu.Unlock()
		if slices.Contains(failing, d) {
			return errors.New("injected fsync failure")
		}
		return nil
	}
	return func(dir string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[dir]
	}
}

func TestFirstWriteIntoAPreparedDirectoryFsyncsItAndItsNewParentsBeforeAcknowledging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f)
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	require.DirExists(t, filepath.Join(root, "t", "_delta_log"))
	require.Zero(t, syncs(filepath.Join(root, "t")), "PrepareDir fsyncs nothing")
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	require.Equal(t, 1, syncs(filepath.Join(root, "t")), "t's entry in the root")
	require.Equal(t, 1, syncs(filepath.Join(root, "t", "_delta_log")), "_delta_log's entry in t")
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/1.json", []byte("v1")))
	require.Equal(t, 1, syncs(filepath.Join(root, "t", "_delta_log")), "paid once")
}

func TestFirstWriteIntoAPreparedDirectoryWhoseFsyncFailsPublishesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	log := filepath.Join(root, "t", "_delta_log")
	syncs := countNewDirSyncs(f, log)
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	err := f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0"))
	require.ErrorContains(t, err, "could not be fsynced into its parent")
	_, err = f.Get(ctx, "t/_delta_log/0.json")
	require.ErrorIs(t, err, ErrNotFound)
	require.Error(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")), "the retry fsyncs again, and fails again")
	require.Equal(t, 2, syncs(log))
}

// What the Delta writer does with a new table: prepare _delta_log/, put
// the first data file in the table directory, commit into _delta_log/.
// The fsync of t after the data file's publish carries _delta_log's
// entry, so the commit does not fsync t again.
func TestTheFsyncAfterAPublishInTheParentOfAPreparedDirectoryMakesItDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	tdir := filepath.Join(root, "t")
	var tFsyncs atomic.Int32
	f.dirFsync = func(d string) error {
		if d == tdir {
			tFsyncs.Add(1)
		}
		return fsyncDir(d)
	}
	syncs := countNewDirSyncs(f)
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	require.NoError(t, f.Put(ctx, "t/part-0.parquet", nil, 0))
	require.EqualValues(t, 1, tFsyncs.Load(), "the data file's publish")
	require.NoError(t, f.PutIfAbsent(ctx, "t/_delta_log/0.json", []byte("v0")))
	require.Zero(t, syncs(filepath.Join(tdir, "_delta_log")), "the commit fsynced t again for _delta_log")
	require.EqualValues(t, 1, tFsyncs.Load())
}

// An fsync of t that was already running when _delta_log was made may
// have missed its entry: it must not count, and the commit pays it.
func TestAnFsyncOfTheParentThatStartedBeforeAPreparedDirectoryWasMadeDoesNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, tdir := storeWithDir(t, "t")
	syncs := countNewDirSyncs(f)
	p := pauseDirFsyncs(f, tdir)
	put := putAsync(ctx, f, "t/part-0.parquet")
	require.Equal(t, 1, p.next(t)) // the publish's fsync of t runs
	require.NoError(t, PrepareDir(ctx, f, "t/_delta_log"))
	p.release <- nil
	require.NoError(t, <-put)

	commit := putAsync(ctx, f, "t/_delta_log/0.json")
	require.Equal(t, 2, p.next(t, commit), "the commit fsyncs t for _delta_log")
	p.release <- nil
	require.NoError(t, <-commit)
	require.Equal(t, 1, syncs(filepath.Join(tdir, "_delta_log")))
}

// The creator's own write: it fsyncs the directories it made after its
// file and before publishing, so a failed fsync leaves nothing published.
func TestWriteWhoseNewDirectoryCannotBeFsyncedIntoItsParentPublishesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	f := &File{root: root}
	syncs := countNewDirSyncs(f, filepath.Join(root, "t", "d"))
	for _, put := range []func() error{
		func() error { return f.Put(ctx, "t/d/x", nil, 0) },
		func() error { return f.PutIfAbsent(ctx, "t/d/y", []byte("y")) },
	} {
		require.ErrorContains(t, put(), "could not be fsynced into its parent")
	}
	for _, key := range []string{"t/d/x", "t/d/y"} {
		_, err := f.Get(ctx, key)
		require.ErrorIs(t, err, ErrNotFound, "%s was published", key)
	}
	require.Equal(t, 2, syncs(filepath.Join(root, "t", "d")), "each write fsyncs the parent of t/d again")
	require.Equal(t, 1, syncs(filepath.Join(root, "t")))
}

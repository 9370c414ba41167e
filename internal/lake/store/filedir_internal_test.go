package store

import (
	"context"
	"os"
	"path/filepath"
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
	return f.awaitDirs(ctx, dir)
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
		if err := f.awaitDirs(ctx, dir); err != nil {
			b.Fatal(err)
		}
	}
}

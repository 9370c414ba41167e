package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The shared directory fsync (dirsync.go) as the directory-creation fence
// sees it: a write into a new directory is never acknowledged before an
// fsync of the parent that started after the directory's os.Mkdir, and a
// failed shared fsync fails every write that shared it.

// pausedDirFsyncs makes f's fsyncs of dir wait, one round at a time, for
// the test: started receives each round's number, release answers it with
// an error (nil: the fsync succeeds). Other directories fsync for real.
type pausedDirFsyncs struct {
	dir     string
	mu      sync.Mutex
	rounds  int
	started chan int
	release chan error
}

func pauseDirFsyncs(f *File, dir string) *pausedDirFsyncs {
	p := &pausedDirFsyncs{dir: dir, started: make(chan int, 8), release: make(chan error)}
	f.dirFsync = func(d string) error {
		if d != p.dir {
			return fsyncDir(d)
		}
		p.mu.Lock()
		p.rounds++
		n := p.rounds
		p.mu.Unlock()
		p.started <- n
		if err := <-p.release; err != nil {
			return err
		}
		return fsyncDir(d)
	}
	return p
}

// next returns the number of the next round of the paused fsyncs to
// start; a write of waiting returning first fails the test (it was
// acknowledged without that round).
func (p *pausedDirFsyncs) next(t *testing.T, waiting ...chan error) int {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for i, done := range waiting {
			select {
			case err := <-done:
				t.Fatalf("write %d returned (%v) before an fsync of %s that started after its change", i, err, p.dir)
			default:
			}
		}
		select {
		case n := <-p.started:
			return n
		case <-timeout:
			t.Fatalf("no fsync of %s started", p.dir)
			return 0
		case <-time.After(time.Millisecond):
		}
	}
}

// waitDirSyncJoined waits until n writes have joined dir's next fsync.
func waitDirSyncJoined(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for dirSyncWaiters(dir) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes joined the next fsync of %s, expected %d", dirSyncWaiters(dir), dir, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func requireRunning(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before an fsync of the parent that started after its mkdir finished", what, err)
	default:
	}
}

// A creates t/a and its fsync of t is running (paused). B and C then
// create t/b and t/c: that fsync started before their mkdirs, so it must
// not acknowledge them; they share the next one. When it fails, both fail
// and publish nothing; a retry runs a fresh fsync.
func TestNewDirectoriesArrivingDuringTheirParentsFsyncShareTheNextOneAndAllFailWithIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	parent := filepath.Join(root, "t")
	require.NoError(t, os.Mkdir(parent, 0o755))
	f := &File{root: root}
	p := pauseDirFsyncs(f, parent)
	put := func(key string) chan error {
		done := make(chan error, 1)
		go func() { done <- f.PutIfAbsent(ctx, key, []byte(key)) }()
		return done
	}

	aDone := put("t/a/x")
	require.Equal(t, 1, p.next(t))
	bDone, cDone := put("t/b/x"), put("t/c/x")
	waitDirSyncJoined(t, parent, 2)
	requireRunning(t, bDone, "B")
	requireRunning(t, cDone, "C")

	p.release <- nil // round 1, A's, succeeds
	require.NoError(t, <-aDone)
	require.Equal(t, 2, p.next(t, bDone, cDone), "B and C share one fsync of t")
	requireRunning(t, bDone, "B")
	requireRunning(t, cDone, "C")

	p.release <- errors.New("injected fsync failure") // round 2 fails
	for _, r := range []struct {
		key  string
		done chan error
	}{{"t/b/x", bDone}, {"t/c/x", cDone}} {
		err := <-r.done
		require.ErrorContains(t, err, "could not be fsynced into its parent", r.key)
		require.ErrorContains(t, err, "injected fsync failure", r.key)
		_, err = f.Get(ctx, r.key)
		require.ErrorIs(t, err, ErrNotFound, "%s was published although its directory is not durable", r.key)
	}

	bDone = put("t/b/x") // the retry fsyncs t again
	require.Equal(t, 3, p.next(t))
	p.release <- nil
	require.NoError(t, <-bDone)
	got, err := f.Get(ctx, "t/b/x")
	require.NoError(t, err)
	require.Equal(t, "t/b/x", string(got))
}

// Writes that publish into one directory at once share its fsync the same
// way; a failed round fails every one of them (their objects are visible,
// as with a failed directory fsync of a single write: docs/object-stores.md).
func TestPublishesIntoOneDirectoryDuringItsFsyncShareTheNextOneAndAllFailWithIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	f := &File{root: root}
	require.NoError(t, f.Put(ctx, "d/first", nil, 0))
	p := pauseDirFsyncs(f, dir)
	put := func(key string) chan error {
		done := make(chan error, 1)
		go func() { done <- f.PutIfAbsent(ctx, key, []byte(key)) }()
		return done
	}
	aDone := put("d/a")
	require.Equal(t, 1, p.next(t))
	bDone, cDone := put("d/b"), put("d/c")
	waitDirSyncJoined(t, dir, 2)
	p.release <- nil
	require.NoError(t, <-aDone)
	require.Equal(t, 2, p.next(t, bDone, cDone))
	requireRunning(t, bDone, "B")
	p.release <- errors.New("injected fsync failure")
	require.ErrorContains(t, <-bDone, "injected fsync failure")
	require.ErrorContains(t, <-cDone, "injected fsync failure")
}

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

// storeWithDir is a file store over a fresh root that holds the directory
// name, and that directory's path.
func storeWithDir(t *testing.T, name string) (*File, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	return &File{root: root}, dir
}

// putAsync starts f.PutIfAbsent of key (with the key as its body) and
// returns the channel its result arrives on.
func putAsync(ctx context.Context, f *File, key string) chan error {
	done := make(chan error, 1)
	go func() { done <- f.PutIfAbsent(ctx, key, []byte(key)) }()
	return done
}

func requireRunning(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before an fsync of the parent that started after its mkdir finished", what, err)
	default:
	}
}

// A's write into t is paused in its fsync of t. B and C then write into t
// too — into directories they create (their mkdirs are t's change) or
// directly (their publishes are): that fsync started before their
// changes, so it must not acknowledge them; they share the next one. When
// it fails, both fail (new directories: having published nothing; direct
// publishes: their objects are visible, as with a failed directory fsync
// of a single write, docs/object-stores.md); a retry runs a fresh fsync.
func TestWritesChangingADirectoryDuringItsFsyncShareTheNextOneAndAllFailWithIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		a, b, c    string
		newSubdirs bool
	}{
		{name: "new directories in it", a: "t/a/x", b: "t/b/x", c: "t/c/x", newSubdirs: true},
		{name: "publishes in it", a: "t/a", b: "t/b", c: "t/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f, parent := storeWithDir(t, "t")
			p := pauseDirFsyncs(f, parent)

			aDone := putAsync(ctx, f, tc.a)
			require.Equal(t, 1, p.next(t))
			bDone, cDone := putAsync(ctx, f, tc.b), putAsync(ctx, f, tc.c)
			waitDirSyncJoined(t, parent, 2)
			requireRunning(t, bDone, "B")
			requireRunning(t, cDone, "C")

			p.release <- nil // round 1, A's, succeeds
			require.NoError(t, <-aDone)
			require.Equal(t, 2, p.next(t, bDone, cDone), "B and C share one fsync of t")

			p.release <- errors.New("injected fsync failure") // round 2 fails
			for key, done := range map[string]chan error{tc.b: bDone, tc.c: cDone} {
				err := <-done
				require.ErrorContains(t, err, "injected fsync failure", key)
				if !tc.newSubdirs {
					continue
				}
				require.ErrorContains(t, err, "could not be fsynced into its parent", key)
				_, err = f.Get(ctx, key)
				require.ErrorIs(t, err, ErrNotFound, "%s was published although its directory is not durable", key)
			}

			if !tc.newSubdirs {
				return
			}
			bDone = putAsync(ctx, f, tc.b) // the retry fsyncs t again
			require.Equal(t, 3, p.next(t))
			p.release <- nil
			require.NoError(t, <-bDone)
			got, err := f.Get(ctx, tc.b)
			require.NoError(t, err)
			require.Equal(t, tc.b, string(got))
		})
	}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Directory fsyncs shared by the per-file writes that need one at the same
// time (group commit for one directory).
//
// A write needs a directory fsync that starts after its own change to the
// directory (a name published in it, or a directory created in it): an
// fsync already running when the write asks may have passed the entry, so
// it does not count. Each directory has at most one fsync running; writes
// that ask meanwhile queue for the next one, and when the running one ends
// the first of them runs it for all (no timer, no goroutine of its own):
// the same queue of rounds as group mode's syncfs (roundQueue, rounds.go).
// On an empty lake that is what new tenants do: their directories are
// created in the lake's root and in _oml_witness/ at about the same time,
// a tenant's layers in the tenant's directory, its gold tables in gold/.
//
// Every write that shares a round gets its result: a failed fsync fails
// every one of them (each new directory stays registered as not durable,
// filedir.go), and a later write asks for a fresh round.
//
// Rejected: a short window before each round to gather more writers (it
// delays every fsync, also the lone ones, by the window; the queue behind
// a running fsync already gathers those that arrive during its disk
// wait); one syncfs for everything (that is group mode, with its
// trade-offs).
var dirSyncs = struct {
	sync.Mutex
	m map[string]*roundQueue // by absolute directory path; idle ones are removed
}{m: map[string]*roundQueue{}}

// syncDirShared returns once an fsync of dir that started after the call
// began has finished, with its error. fsync runs it (fsyncDir, or a test's
// stand-in); the caller that runs a round uses its own. A directory's
// queue is dropped once no round runs and none is pending.
func syncDirShared(dir string, fsync func(dir string) error) error {
	dirSyncs.Lock()
	q := dirSyncs.m[dir]
	if q == nil {
		q = &roundQueue{}
		dirSyncs.m[dir] = q
	}
	run := func(int) error {
		seq := mkdirSeq.Load()
		err := fsync(dir)
		if err == nil {
			healCreations(dir, seq)
		}
		return err
	}
	ended := func() {
		if q.pending == nil {
			delete(dirSyncs.m, dir)
		}
	}
	return q.await(context.Background(), &dirSyncs.Mutex, run, ended)
}

// dirSyncWaiters is how many callers have joined dir's next fsync, not yet
// started (tests wait for arrivals).
func dirSyncWaiters(dir string) int {
	dirSyncs.Lock()
	defer dirSyncs.Unlock()
	if q := dirSyncs.m[dir]; q != nil && q.pending != nil {
		return q.pending.waiters
	}
	return 0
}

// fsyncDir opens dir, fsyncs it and closes it: three system calls, without
// os.File's set-up (the poller registration, the finalizer). A filesystem
// that cannot fsync a directory (EINVAL) has nothing more to flush.
func fsyncDir(dir string) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	err = unix.Fsync(fd)
	unix.Close(fd)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

func openDir(dir string) (int, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", dir, err)
		}
		return fd, nil
	}
}

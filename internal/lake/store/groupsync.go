package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// FileSync is how a file store makes its writes durable (the lake URL's
// sync parameter: file:///path?sync=group).
type FileSync string

const (
	// SyncPerFile fsyncs every temporary file before it is published and
	// every directory after a name was published or created in it: each
	// put pays its own flushes (two fsyncs, more for new directories).
	SyncPerFile FileSync = "file"
	// SyncGroup shares the flushes of concurrent puts: a put waits for one
	// syncfs(2) of the lake's filesystem after writing its temporary file
	// and one after publishing it, and whoever waits first runs the round
	// for everyone waiting. It flushes everything dirty on that filesystem,
	// other programs' writes included (see docs/object-stores.md).
	SyncGroup FileSync = "group"
)

// FileOption configures a file store (NewFile).
type FileOption func(*File)

// WithSync selects how the store flushes (SyncPerFile when not given).
func WithSync(mode FileSync) FileOption {
	return func(f *File) {
		f.group = nil
		if mode == SyncGroup {
			f.group = newGroupSync(f.root)
		}
	}
}

// parseFileSync is the sync parameter of a file lake URL.
func parseFileSync(v string) (FileSync, error) {
	switch m := FileSync(v); m {
	case SyncPerFile, SyncGroup:
		return m, nil
	}
	return "", fmt.Errorf("sync=%q is not a sync mode: write sync=file (fsync each file and directory, the default) or sync=group (one syncfs shared by concurrent writes)", v)
}

// SyncMode is how the store flushes its writes.
func (f *File) SyncMode() FileSync {
	if f.group != nil {
		return SyncGroup
	}
	return SyncPerFile
}

// groupSync runs the syncfs rounds that group-mode puts share. A put is
// durable after a round that started after its step (the temporary file
// written, the name published) finished: a round already running when the
// put arrives may have passed its pages, so the put waits for the next one.
// At most one round runs at a time; the first waiter that finds none running
// starts the pending one, and every waiter of a round gets its result. No
// goroutine of its own: rounds run on the callers' goroutines.
type groupSync struct {
	root string

	// round flushes once; syncfs on the root's filesystem unless a test
	// replaces it.
	round func() error

	mu     sync.Mutex // guards rounds
	rounds roundQueue

	// observe, set by tests, sees each put's steps (named by its
	// temporary file) as they happen.
	observe func(step putStep, tmp string)

	rootMu  sync.Mutex // guards rootFD and rootDev
	rootFD  *os.File   // the root directory, opened on first use, never closed
	rootDev uint64
}

// putStep is a step of a group-mode put, for tests (groupSync.observe).
type putStep int

const (
	stepWritten   putStep = iota // the temporary file is written
	stepPublished                // renamed or linked under its key
	stepDurable                  // a round after the publish succeeded
)

func newGroupSync(root string) *groupSync {
	g := &groupSync{root: root}
	g.round = g.syncfs
	return g
}

// wait returns once a round that started after the call began has finished
// (its error, if it failed), or when ctx ends (the round may still run; the
// caller's step is then not known durable).
func (g *groupSync) wait(ctx context.Context) error {
	g.mu.Lock()
	return g.rounds.await(ctx, &g.mu, g.round, nil)
}

// rootDir opens the root directory once (it need not exist when the store is
// opened: the first write creates it) and returns its device.
func (g *groupSync) rootDir() (*os.File, uint64, error) {
	g.rootMu.Lock()
	defer g.rootMu.Unlock()
	if g.rootFD != nil {
		return g.rootFD, g.rootDev, nil
	}
	d, err := os.Open(g.root)
	if err != nil {
		return nil, 0, err
	}
	fi, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, 0, err
	}
	dev, err := device(fi)
	if err != nil {
		d.Close()
		return nil, 0, err
	}
	g.rootFD, g.rootDev = d, dev
	return d, dev, nil
}

func (g *groupSync) syncfs() error {
	d, _, err := g.rootDir()
	if err != nil {
		return err
	}
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs of the filesystem holding %s: %w", g.root, err)
	}
	return nil
}

// covers reports whether a round flushes the open file fh: syncfs flushes
// one filesystem only, so a file on another one (a mount point or a
// symbolic link below the root) is flushed per file.
func (g *groupSync) covers(fi os.FileInfo) (bool, error) {
	_, rootDev, err := g.rootDir()
	if err != nil {
		return false, err
	}
	dev, err := device(fi)
	if err != nil {
		return false, err
	}
	return sameFilesystem(rootDev, dev), nil
}

// sameFilesystem is the fallback decision: a round covers a file whose
// device is the root's.
func sameFilesystem(rootDev, dev uint64) bool { return rootDev == dev }

// device is the filesystem a file is on (st_dev).
func device(fi os.FileInfo) (uint64, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: its status has no device number", fi.Name())
	}
	return uint64(st.Dev), nil // Dev is narrower on some platforms
}

// putSync is how one put makes its two steps durable: per file (g nil) or
// by the store's group rounds.
type putSync struct {
	f   *File
	g   *groupSync
	tmp string // the temporary file, for tests' observe
}

// flushWritten makes a fully written temporary file durable, or decides
// that a round will: per file it is fsynced; in group mode a file on the
// root's filesystem is left to the rounds and one elsewhere fsynced (and
// its put then flushed per file throughout).
func (f *File) flushWritten(fh *os.File) (putSync, error) {
	if f.group != nil {
		fi, err := fh.Stat()
		if err != nil {
			return putSync{}, err
		}
		ok, err := f.group.covers(fi)
		if err != nil {
			return putSync{}, err
		}
		if ok {
			return putSync{f: f, g: f.group, tmp: fh.Name()}, nil
		}
	}
	return putSync{f: f}, fh.Sync()
}

// beforePublish waits, in group mode, for a round that started after the
// temporary file was written: no name may point at bytes a crash can lose.
func (ps putSync) beforePublish(ctx context.Context) error {
	if ps.g == nil {
		return nil
	}
	ps.note(stepWritten)
	return ps.g.wait(ctx)
}

// afterPublish makes the published name durable: the directory's fsync per
// file, a round that started after the rename or link in group mode. If it
// fails the object is visible but the put reports failure, as per file when
// the directory's fsync fails: the Delta writer re-reads the log after any
// failed commit and finds it; a retried Put replaces the object.
func (ps putSync) afterPublish(ctx context.Context, dir string) error {
	if ps.g == nil {
		return ps.f.syncDir(dir)
	}
	ps.note(stepPublished)
	if err := ps.g.wait(ctx); err != nil {
		return err
	}
	ps.note(stepDurable)
	return nil
}

func (ps putSync) note(step putStep) {
	if ps.g.observe != nil {
		ps.g.observe(step, ps.tmp)
	}
}

// syncCreated makes directory dir, just created in parent, durable: per
// file parent is fsynced; in group mode a directory on the root's
// filesystem needs nothing, since the round after the put's publish
// started after the mkdir and covers parent's entry too.
func (f *File) syncCreated(parent, dir string) error {
	if f.group != nil {
		if fi, err := os.Lstat(dir); err == nil {
			if ok, err := f.group.covers(fi); err == nil && ok {
				return nil
			}
		}
	}
	return f.syncDir(parent)
}

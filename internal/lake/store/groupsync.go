package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// SyncAuto uses SyncGroup's rounds on Linux 5.8 or later while they
	// cost less than per-file fsyncs would, and SyncPerFile otherwise,
	// choosing put by put (autosync.go).
	SyncAuto FileSync = "auto"
	// DefaultFileSync is what a file lake URL without ?sync= gets.
	DefaultFileSync = SyncAuto
)

// FileOption configures a file store (NewFile).
type FileOption func(*File)

// WithSync selects how the store flushes (SyncPerFile when not given;
// Open gives DefaultFileSync).
func WithSync(mode FileSync) FileOption {
	return func(f *File) { f.mode = mode }
}

// setUpSync prepares the rounds the store's mode needs (NewFile, after
// the options): group mode always, auto mode on a kernel whose syncfs
// reports write-back errors.
func (f *File) setUpSync() {
	f.group, f.auto = nil, nil
	switch f.mode {
	case SyncGroup:
		f.group = newGroupSync(f.root)
	case SyncAuto:
		release := f.kernel
		if release == nil {
			release = kernelRelease
		}
		if syncfsReportsErrors(release()) {
			f.group = newGroupSync(f.root)
			f.auto = newAutoSync()
			f.group.measure = f.auto.round
		}
	default:
		f.mode = SyncPerFile
	}
}

// parseFileSync is the sync parameter of a file lake URL.
func parseFileSync(v string) (FileSync, error) {
	switch m := FileSync(v); m {
	case SyncPerFile, SyncGroup, SyncAuto:
		return m, nil
	}
	return "", fmt.Errorf("sync=%q is not a sync mode: write sync=auto (group rounds while they are fast, per-file fsyncs otherwise, the default), sync=file (fsync each file and directory) or sync=group (one syncfs shared by concurrent writes)", v)
}

// SyncMode is the mode the store was opened with (SyncAuto included; see
// SyncInEffect for what its writes do now).
func (f *File) SyncMode() FileSync { return f.mode }

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

	// measure, when set (sync=auto, autosync.go), runs each round and
	// takes in its duration and how many callers it served.
	measure func(waiters int, round func() error) error

	// owed counts the puts published without a round of their own
	// (PutOwed, owed.go); covered is owed as a successful round found it
	// when it started: every put counted by then is durable. lastStart is
	// owed when the previous round started (touched only by the running
	// round: one runs at a time).
	owed, covered atomic.Uint64
	lastStart     uint64

	rootMu  sync.Mutex // guards rootFD and rootDev
	rootFD  *os.File   // the root directory, opened on first use, never closed
	rootDev uint64
}

// putStep is a step of a put, for tests (File.observe).
type putStep int

const (
	stepWritten   putStep = iota // the temporary file is written
	stepPublished                // renamed or linked under its key
	stepDurable                  // the publish is flushed: a round after it, or its directory's fsync
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
	return g.rounds.await(ctx, &g.mu, g.runRound, nil)
}

// runRound runs one round for waiters callers. measure, when set
// (sync=auto), runs the round and takes in its cost. The creations the
// round made durable are ended by the puts it served (beforePublish).
// A round also covers the owed puts counted when it started; each one it
// is the first to cover counts as the two steps (written, published) it
// would have waited for, so sync=auto weighs a round by everything it
// served.
func (g *groupSync) runRound(waiters int) error {
	start := g.owed.Load()
	served := waiters + 2*int(start-g.lastStart)
	g.lastStart = start
	var err error
	if g.measure != nil {
		err = g.measure(served, g.round)
	} else {
		err = g.round()
	}
	if err == nil {
		g.covered.Store(start) // rounds run one at a time, in order: it only grows
	}
	return err
}

// coversDir reports whether a round flushes directory dir's entry in its
// parent (dir, which this process created, is on the root's filesystem).
// Only directories below this store's root count: another store's
// rounds may be a test's stand-in for syncfs.
func (g *groupSync) coversDir(dir string) bool {
	if !strings.HasPrefix(dir, strings.TrimSuffix(g.root, string(filepath.Separator))+string(filepath.Separator)) {
		return false
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	ok, err := g.covers(fi)
	return err == nil && ok
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

// putSync is how one put makes its steps durable: per file (g nil) or by
// the store's group rounds. The choice is made once, when its temporary
// file is written (flushWritten), and the put follows that protocol to the
// end; in sync=auto a put's neighbours may follow the other one.
type putSync struct {
	f    *File
	g    *groupSync
	tmp  string   // the temporary file, for tests' observe
	made []newDir // in group mode, the directories the put created, ended by beforePublish
}

// flushWritten makes a fully written temporary file durable, or decides
// that a round will: per file it is fsynced; in group mode (or sync=auto
// while it uses rounds) a file on the root's filesystem is left to the
// rounds and one elsewhere fsynced (and its put then flushed per file
// throughout).
func (f *File) flushWritten(fh *os.File) (putSync, error) {
	if g := f.groupNow(); g != nil {
		fi, err := fh.Stat()
		if err != nil {
			return putSync{}, err
		}
		ok, err := g.covers(fi)
		if err != nil {
			return putSync{}, err
		}
		if ok {
			return putSync{f: f, g: g, tmp: fh.Name()}, nil
		}
	}
	ps := putSync{f: f, tmp: fh.Name()}
	ps.note(stepWritten)
	fsync := fh.Sync
	if f.fileFsync != nil {
		fsync = func() error { return f.fileFsync(fh) }
	}
	return ps, f.timedFsync(fsync)
}

// createdDirs makes the directories the put created durable in their
// parents: per file by fsyncing each parent now (after the file's fsync);
// in group mode by the round beforePublish waits for, which started after
// every mkdir on the way. Until then their creations stay registered, so
// no write of this process, in either mode, publishes below them first.
func (ps *putSync) createdDirs(made []newDir) error {
	if ps.g == nil {
		return ps.f.syncNewDirs(made)
	}
	ps.made = made
	return nil
}

// beforePublish waits, in group mode, for a round that started after the
// temporary file was written: no name may point at bytes a crash can lose.
// The same round made the put's new directories durable: their creations
// end with its result. A successful one also ends the owed or failed
// creations in dir, the put's directory, and in its ancestors (healPath).
//
// Per file it waits only for what the store owes (settleOwed): a put the
// store left owed before this one began is durable before this one
// publishes (owed.go); in rounds the same round covers those.
func (ps putSync) beforePublish(ctx context.Context, dir string) error {
	if ps.g == nil {
		return ps.f.settleOwed(ctx)
	}
	ps.note(stepWritten)
	seq := mkdirSeq.Load()
	// A failed round leaves them registered as failed: a later write below
	// them makes them durable again before it publishes.
	err := ps.g.wait(ctx)
	for _, nd := range ps.made {
		finishDir(nd.dir, nd.c, err)
	}
	if err == nil {
		healPath(dir, seq)
	}
	return err
}

// afterPublish makes the published name durable: the directory's fsync per
// file, a round that started after the rename or link in group mode. If it
// fails the object is visible but the put reports failure, as per file when
// the directory's fsync fails: the Delta writer re-reads the log after any
// failed commit and finds it; a retried Put replaces the object.
func (ps putSync) afterPublish(ctx context.Context, dir string) error {
	ps.note(stepPublished)
	var err error
	if ps.g == nil {
		err = ps.f.syncDir(dir)
	} else {
		err = ps.g.wait(ctx)
	}
	if err != nil {
		return err
	}
	ps.note(stepDurable)
	return nil
}

func (ps putSync) note(step putStep) {
	if ps.f.observe != nil {
		ps.f.observe(step, ps.tmp, ps.g != nil)
	}
}

// syncCreated makes directory dir, created in parent earlier, durable for
// a put that syncs as g says: per file (g nil) parent is fsynced; in group
// mode a directory on the root's filesystem waits for a round that starts
// now, after its mkdir.
func (f *File) syncCreated(ctx context.Context, g *groupSync, parent, dir string) error {
	if g != nil && g.coversDir(dir) {
		return g.wait(ctx)
	}
	return f.syncDir(parent)
}

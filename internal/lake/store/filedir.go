package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Directory creation and the fence that makes writes wait for it.
//
// A directory a write creates is durable only once its parent has been
// fsynced after os.Mkdir. Between the two, the directory already exists for
// everyone else: a second write into it opens its temporary file there
// directly (or its mkdirAll finds the directory and stops), publishes,
// fsyncs the directory, and would acknowledge while the directory's own
// entry in its parent can still vanish in a power loss, taking the
// acknowledged object with it. The same holds when the fresh directory is
// an ancestor of the one written into.
//
// So every creation is registered in creations before os.Mkdir and
// unregistered after the parent's fsync, and every write, before it
// publishes, waits for the registered creations of its directory and of
// each ancestor (awaitDirs). Waiting before publishing, rather than after
// the write's own directory fsync, means a write that fails here has
// published nothing: Put leaves the old object, PutIfAbsent leaves the key
// absent, and the caller's retry does not meet its own object as ErrExists.
//
// A creation whose parent fsync failed stays registered as failed: the
// directory exists but is not known durable. The writes waiting for it fail
// (their outcome would not be durable either), and the next write below it
// fsyncs the parent again itself, so a retry either makes the directory
// durable or fails again; it never acknowledges on top of an unsynced
// directory.
//
// The registry is per process, not per File, so two File values over the
// same tree (a lake and one of its tables opened by URL) see each other's
// creations. It does not reach other processes. When this process's
// os.Mkdir meets a directory another process has just made (EEXIST), it
// fsyncs the parent itself; but a write that finds the directory already
// there (its temporary file opens) cannot tell that another process created
// it a moment ago, and can acknowledge before that process's fsync. Closing
// that too would take an fsync of every ancestor on every write. In oml the
// table directories are created only by the holder of the lake writer
// lease (`oml lake drain`, or `oml lake repair`, which takes the same
// lease); maintenance writes only into tables that exist. The exception is the witness
// directory of a new tenant, which `oml chain witness` and the lake writer
// may both be creating (docs/object-stores.md).
//
// Rejected: a lock per directory held across Mkdir and the parent fsync
// (every write would take the locks of its whole path, creations or not);
// fsyncing every ancestor on every write (one more fsync per path
// component, on every write, for a window of microseconds). The fast path
// below costs one uncontended mutex and no system call.
var creations = struct {
	sync.Mutex
	m map[string]*dirCreation // by absolute directory path
}{m: map[string]*dirCreation{}}

// dirCreation is one directory creation in progress, or one whose parent
// fsync failed.
type dirCreation struct {
	made     chan struct{} // closed when the creator's os.Mkdir has returned
	madeOnce sync.Once
	madeSeq  uint64        // mkdirSeq after the os.Mkdir; set before made is closed
	exists   bool          // set before made is closed: the os.Mkdir made the directory or found it there
	done     chan struct{} // closed when the creation is over
	err      error         // set before done is closed: the parent fsync failed, or is owed (errOwed)
}

// mkdirSeq counts the os.Mkdir calls that returned, so that an fsync of a
// parent can tell which creations in it started before the fsync did
// (healCreations).
var mkdirSeq atomic.Uint64

// errOwed marks a creation whose parent fsync was left to the next write
// below it or to the next fsync of the parent (PrepareDir).
var errOwed = errors.New("its parent has not been fsynced since it was created")

func newCreation() *dirCreation {
	return &dirCreation{made: make(chan struct{}), done: make(chan struct{})}
}

func (c *dirCreation) markMade() {
	c.madeOnce.Do(func() {
		c.madeSeq = mkdirSeq.Add(1)
		close(c.made)
	})
}

// claimDir registers the creation of dir by the caller, or returns the
// creation already registered for it (mine false).
func claimDir(dir string) (c *dirCreation, mine bool) {
	creations.Lock()
	defer creations.Unlock()
	if c := creations.m[dir]; c != nil {
		return c, false
	}
	c = newCreation()
	creations.m[dir] = c
	return c, true
}

// finishDir ends the creation c of dir. A failed parent fsync (err) keeps
// it registered, so later writes below dir fsync the parent again.
func finishDir(dir string, c *dirCreation, err error) {
	c.markMade()
	creations.Lock()
	c.err = err
	if err == nil && creations.m[dir] == c {
		delete(creations.m, dir)
	}
	creations.Unlock()
	close(c.done)
}

// forgetDir drops the finished creation c of dir, whose directory is gone
// (its os.Mkdir failed, or it was removed since): there is nothing left to
// make durable, and the next os.Mkdir of dir is a new creation.
func forgetDir(dir string, c *dirCreation) {
	creations.Lock()
	if creations.m[dir] == c {
		delete(creations.m, dir)
	}
	creations.Unlock()
}

// newDir is a directory a write created (or found just made by another
// process) and has yet to fsync into its parent.
type newDir struct {
	dir string
	c   *dirCreation
}

// mkdirAll creates dir and its missing parents and appends the ones it
// created to made, outermost first. It does not fsync them: the write
// first puts its temporary file down and flushes it, then fsyncs the new
// directories into their parents (syncNewDirs) before it publishes. On a
// journaling filesystem (ext4, xfs) the file's fsync usually commits the
// journal with the mkdirs in it, so the parents' fsyncs that follow find
// their change committed already instead of each committing one of their
// own (the figures in docs/object-stores.md are from an ext4 without a
// journal, where the order changes nothing: each fsync writes its
// directory's blocks). Until
// syncNewDirs, the creations stay registered, so every other write into
// them waits (awaitDirs); a write holding creations waits for no other
// write's fsync before its own syncNewDirs, so two writes creating nested
// directories cannot wait for each other.
//
// It is called when a temporary file could not be opened because dir is
// missing (or by PrepareDir), so it stats nothing: it creates the chain
// downward from the deepest ancestor known to exist (knownDirs,
// dircache.go), one os.Mkdir per missing level. An ancestor that vanished
// since it was cached fails the first os.Mkdir below it (ENOENT); it is
// dropped and the next known one tried. With none known it climbs from
// the leaf (mkdirClimb).
func (f *File) mkdirAll(ctx context.Context, dir string, made *[]newDir) error {
	for {
		base := knownDirs.knownAncestor(f.root, dir)
		if base == "" {
			return f.mkdirClimb(ctx, dir, made)
		}
		err := f.mkdirBelow(ctx, base, dir, made)
		if !errors.Is(err, errVanished) {
			return err
		}
		knownDirs.drop(base)
	}
}

// errVanished is mkdirBelow's report that its cached base is gone.
var errVanished = errors.New("a cached directory vanished")

// mkdirBelow creates each directory from below base down to dir, base
// existing. The first os.Mkdir failing with ENOENT or ENOTDIR means base
// is gone (or no longer a directory): errVanished, with nothing created.
func (f *File) mkdirBelow(ctx context.Context, base, dir string, made *[]newDir) error {
	start := len(base)
	if !strings.HasSuffix(base, string(os.PathSeparator)) {
		start++
	}
	first := true
	for i := start; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != os.PathSeparator {
			continue
		}
		d := dir[:i]
		err := f.mkdir(ctx, d, made)
		if first && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
			return errVanished
		}
		first = false
		if errors.Is(err, syscall.ENOTDIR) {
			return fileAbove(d, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mkdirClimb is mkdirAll without a known ancestor: it tries os.Mkdir of
// dir first and climbs only when the parent is missing too, no stat on
// the way (a stat per level and one of the first existing ancestor cost
// two calls more per created chain than the failed os.Mkdir calls do).
func (f *File) mkdirClimb(ctx context.Context, dir string, made *[]newDir) error {
	err := f.mkdir(ctx, dir, made)
	if errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		if parent == dir {
			return err
		}
		if err := f.mkdirClimb(ctx, parent, made); err != nil {
			return err
		}
		err = f.mkdir(ctx, dir, made)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return fileAbove(dir, err)
	}
	return err
}

// fileAbove names the file that os.Mkdir of dir met in its path
// (ENOTDIR), for the error; a failure path only, so it may stat.
func fileAbove(dir string, err error) error {
	for d := filepath.Dir(dir); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if fi, serr := os.Stat(d); serr == nil && !fi.IsDir() {
			return errIsFile(d)
		}
	}
	return err
}

// mkdir creates dir, whose parent exists, and appends it to made. A
// directory another write of this process is creating is not created
// again: mkdir waits only for that write's os.Mkdir (never for its fsync,
// see mkdirAll), and the write's own awaitDirs waits for the rest.
func (f *File) mkdir(ctx context.Context, dir string, made *[]newDir) error {
	c, mine := claimDir(dir)
	if !mine {
		select {
		case <-c.made:
		default:
			if f.waitingForDir != nil {
				f.waitingForDir(dir)
			}
			select {
			case <-c.made:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-c.done:
		default:
			if c.exists {
				// Its creator's os.Mkdir has just made it, and the creation
				// is still in flight: no stat. A finished one (owed or
				// failed) may be old and its directory gone since.
				knownDirs.add(f.root, dir)
				return nil
			}
		}
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Its os.Mkdir failed (then it finishes at once), or the
			// directory was removed since: try ours.
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			forgetDir(dir, c)
			return f.mkdir(ctx, dir, made)
		case err != nil:
			return err
		case !fi.IsDir():
			return errIsFile(dir)
		}
		knownDirs.add(f.root, dir)
		return nil
	}
	if f.beforeMkdir != nil {
		f.beforeMkdir(dir)
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			finishDir(dir, c, nil)
			return errIsFile(dir)
		}
		// No creation of dir is in flight in this process (the claim is
		// ours). Since the open that sent us here either a write of this
		// process finished creating it (this fsync is then redundant) or
		// another process made it, and that one may not have fsynced the
		// parent yet: fsync it ourselves. One fsync, only when two writers
		// race to create a directory.
		err = nil
	}
	if err != nil {
		finishDir(dir, c, nil) // nothing was created, nothing to wait for
		return err
	}
	c.exists = true
	c.markMade()
	knownDirs.add(f.root, dir)
	*made = append(*made, newDir{dir: dir, c: c})
	return nil
}

// healCreations ends the creations in parent that an fsync of parent,
// started when mkdirSeq was at seq, has made durable: those that were
// owed or failed (nobody is fsyncing them) and made before it started.
// A creation still in flight is left to its creator.
func healCreations(parent string, seq uint64) {
	creations.Lock()
	defer creations.Unlock()
	for dir, c := range creations.m {
		select {
		case <-c.done:
		default:
			continue
		}
		if c.err != nil && c.madeSeq <= seq && filepath.Dir(dir) == parent {
			delete(creations.m, dir)
		}
	}
}

// healPath ends, after a successful syncfs round that started when
// mkdirSeq was at seq, the creations that were owed or had failed, were
// made before the round started, and whose entry lives in dir or in one
// of its ancestors: dir is the directory of a put in rounds, whose
// temporary file is on the root's filesystem (flushWritten checked its
// device), so the round flushed dir's entries, and those of the
// directories on its path (as it flushed the directories the put created
// itself, putSync.createdDirs). That is how a new table's _delta_log/,
// prepared before its first data file (PrepareDir), is paid by the data
// file's round. No stat: the put's own fstat is the check. A creation
// off every such path is paid by the first write below it (awaitDir).
func healPath(dir string, seq uint64) {
	creations.Lock()
	defer creations.Unlock()
	for d, c := range creations.m {
		select {
		case <-c.done:
		default:
			continue // in flight: its creator ends it
		}
		if c.err != nil && c.madeSeq <= seq && onPath(parentOf(d), dir) {
			delete(creations.m, d)
		}
	}
}

// onPath reports whether p is dir or one of its ancestors.
func onPath(p, dir string) bool {
	if !strings.HasPrefix(dir, p) {
		return false
	}
	return len(dir) == len(p) || dir[len(p)] == os.PathSeparator || strings.HasSuffix(p, string(os.PathSeparator))
}

// PrepareDir creates the directory below which the store will hold the
// keys starting with prefix (and its missing parents), and leaves their
// fsyncs into their parents owed: the first write below one of them, or
// the next fsync of its parent, pays it. The Delta writer prepares a new
// table's _delta_log/ before it writes the table's first data file, so
// that the fsync of the table directory after that file is published
// also carries _delta_log's entry, and the first commit does not fsync
// the table directory a second time. Other stores have no directories:
// for them it does nothing.
func PrepareDir(ctx context.Context, s Store, prefix string) error {
	if sub, ok := s.(*subStore); ok {
		s, prefix = sub.inner, sub.prefix+prefix
	}
	f, ok := s.(*File)
	if !ok {
		return nil
	}
	p, err := f.path(strings.Trim(prefix, "/"))
	if err != nil {
		return err
	}
	if knownDirs.has(p) {
		return nil
	}
	var made []newDir
	err = f.mkdirAll(ctx, p, &made)
	for _, nd := range made {
		finishDir(nd.dir, nd.c, errOwed)
	}
	if err != nil {
		return fmt.Errorf("%s: preparing directory %q: %w", f, prefix, err)
	}
	return nil
}

// syncNewDirs fsyncs each directory in made into its parent and ends its
// creation, all of them even when one fails (each creation ends with its
// own result); the first failure is the error.
func (f *File) syncNewDirs(made []newDir) error {
	var first error
	for _, nd := range made {
		err := f.syncNewDir(context.Background(), nil, nd.dir)
		finishDir(nd.dir, nd.c, err)
		if err != nil && first == nil {
			first = notDurable(nd.dir, err)
		}
	}
	return first
}

// syncNewDir makes dir, which this process created, durable in its parent
// for a put that syncs as g says (nil: per file, syncCreated).
func (f *File) syncNewDir(ctx context.Context, g *groupSync, dir string) error {
	if f.beforeSyncNewDir != nil {
		if err := f.beforeSyncNewDir(dir); err != nil {
			return err
		}
	}
	return f.syncCreated(ctx, g, filepath.Dir(dir), dir)
}

// awaitDirs returns once no creation of dir or of an ancestor of dir is in
// progress in this process, and fails if one of them is not durable. When
// none is registered, the common case, it costs one mutex and no system
// call. g is how the calling put syncs (nil: per file): a creation it
// takes over is made durable its way.
func (f *File) awaitDirs(ctx context.Context, dir string, g *groupSync) error {
	creations.Lock()
	none := len(creations.m) == 0
	creations.Unlock()
	if none {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		if err := f.awaitDir(ctx, d, g); err != nil {
			return err
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// awaitDir waits for the creation of dir registered in this process, if
// any. A creation that failed earlier and that nobody is retrying is
// retried here: this write fsyncs the parent itself.
func (f *File) awaitDir(ctx context.Context, dir string, g *groupSync) error {
	creations.Lock()
	c := creations.m[dir]
	if c == nil {
		creations.Unlock()
		return nil // never created here, or created and synced already
	}
	select {
	case <-c.done:
		// Failed earlier, or owed (PrepareDir): take it over.
		retry := newCreation()
		retry.exists = true
		retry.markMade()
		creations.m[dir] = retry
		creations.Unlock()
		err := f.syncNewDir(ctx, g, dir)
		finishDir(dir, retry, err)
		if err != nil {
			return notDurable(dir, err)
		}
		return nil
	default:
	}
	creations.Unlock()
	if f.waitingForDir != nil {
		f.waitingForDir(dir)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.err == errOwed {
		return f.awaitDir(ctx, dir, g) // prepared, not failed: take it over
	}
	if c.err != nil {
		return notDurable(dir, c.err)
	}
	return nil
}

func notDurable(dir string, err error) error {
	return fmt.Errorf("directory %s was created but could not be fsynced into its parent (%v), so nothing written in it is known to be durable: nothing was published; check the disk and retry the write", dir, err)
}

func errIsFile(dir string) error {
	return fmt.Errorf("%s is a file, so no object can be stored below it", dir)
}

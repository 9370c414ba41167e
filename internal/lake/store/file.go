package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// File is the local-filesystem backend (file:///abs/path). Keys map to files
// below the root directory; '/' in a key is a directory separator.
//
// Durability: every write goes to a temporary file in the destination
// directory, is flushed, and is then published by rename(2) (Put) or
// link(2) (PutIfAbsent); the published name is flushed before the write is
// acknowledged, so an acknowledged write survives a power loss. Each write
// follows one of two protocols from start to end. Per file (SyncPerFile,
// and NewFile without WithSync) the temporary file is fsynced, the
// directory after publishing, and every directory the write had to create
// into its parent. In rounds (SyncGroup, groupsync.go) concurrent writes
// share syncfs(2) rounds instead: one that started after the file was
// written before publishing (it also makes the directories the write
// created durable), one that started after the publish before
// acknowledging; a file on another filesystem than the root's is flushed
// per file. SyncAuto (autosync.go, the lake URL's default) chooses one of
// the two for each write: rounds on Linux 5.8 or later while they cost
// less than per-file fsyncs, per file otherwise.
// A write into a directory (or below one) that another write of this
// process is still creating waits, before publishing, until that directory
// is durable in its parent, whichever protocol either write follows, and
// fails, publishing nothing, if its flush failed (filedir.go). Per file,
// across processes this holds only for a directory both create at once
// (the loser of os.Mkdir fsyncs the parent itself), not for a write that
// finds the directory there already while its creator is still between
// os.Mkdir and the fsync; a write in rounds covers that case too (the
// round after the publish flushes the other process's mkdir as well).
//
// The fsyncs a per-file write still makes, each needed by durability:
//
//  1. The temporary file, before it is published: a name must never point
//     at bytes a power loss can drop (the Delta log would reference a torn
//     commit or data file).
//  2. Each directory the write created, into its parent, before it
//     publishes (after 1, so that on a journaling filesystem 1's commit
//     usually carries the mkdirs already): otherwise the new directory,
//     and the object in it, can vanish after the acknowledgement. A
//     directory made by PrepareDir is paid by the first write below it,
//     or by any fsync of its parent, or the round before publishing of a
//     put in rounds into its parent or below it, that started after its
//     os.Mkdir (the Delta writer's data file publish in the table
//     directory pays its _delta_log/, so a new table fsyncs its directory
//     once, not twice).
//  3. The directory the name was published in, after rename(2)/link(2) and
//     before acknowledging: the rename or link is the commit point.
//
// A write in rounds replaces 1 and 2 by the round before publishing and 3
// by the round after it. An owed put (PutOwed, owed.go: a data file) in
// rounds waits for neither: the next write of the store covers it with its
// own round before publishing, or, per file, waits for a round that does.
// A directory a write in rounds created stays
// registered as in creation until its round before publishing has ended,
// so a per-file write below it (sync=auto mixes them) waits for that round
// as it waits for another write's fsync of the parent.
//
// 2 and 3 are fsyncs of directories, and each is shared by the writes of
// the process that need one of the same directory at the same time
// (dirsync.go): new tenants' directories in the lake root and in
// _oml_witness/, a tenant's layers, two gold tables. Removing the
// temporary name after link(2) needs none: a leftover after a crash is
// ignored by List and swept by RemoveStaleTemp.
//
// What a put costs besides those: a directory that exists costs no call
// at all (the temporary file's open is the existence check); a missing
// one one os.Mkdir per missing level, created downward from the deepest
// directory this process knows exists (dircache.go), no stat; the publish
// is rename(2) or link(2) with no stat before it. The cache only saves
// those calls: whether a directory is durable is the registry of
// creations' to say (filedir.go), never the cache's, and a cached
// directory that vanished is recreated and fsynced as a new one.
//
// Like S3 gateways that map keys to files, a key "x" and a key "x/y" cannot
// both exist.
type File struct {
	root  string
	mode  FileSync   // as opened (WithSync)
	group *groupSync // the shared syncfs rounds; nil: per file only
	auto  *autoSync  // sync=auto's choice between rounds and per file; nil: no choice
	// kernel, set by tests, stands for kernelRelease (sync=auto's check).
	kernel func() string
	// linkOnly is set once renameat2(2) with RENAME_NOREPLACE was refused
	// as unsupported under root (a kernel before 3.15, a filesystem
	// without it: EINVAL, ENOSYS, ENOTSUP); from then on PutIfAbsent
	// links (publishNoReplace). Tests set it to take the link path.
	linkOnly atomic.Bool

	// Test hooks, nil outside tests (export_test.go sets some):
	// beforeSyncNewDir runs between os.Mkdir and the parent's flush (an
	// error stands for a failed fsync); waitingForDir runs when a write
	// starts waiting for another write's creation of dir; dirFsync, when
	// set, runs the directory fsyncs this store's writes run (dirsync.go);
	// beforeMkdir runs just before this store's os.Mkdir of dir (another
	// process may make it there first).
	beforeSyncNewDir func(dir string) error
	waitingForDir    func(dir string)
	beforeMkdir      func(dir string)
	dirFsync         func(dir string) error
	fileFsync        func(fh *os.File) error // runs the temporary files' fsyncs
	// observe sees each put's steps (named by its temporary file; group:
	// whether the put uses rounds) as they happen.
	observe func(step putStep, tmp string, group bool)
}

var _ Store = (*File)(nil)

// NewFile returns a file store rooted at the absolute directory root. The
// directory need not exist yet; writes create it.
func NewFile(root string, opts ...FileOption) (*File, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("file store root %q is not an absolute path", root)
	}
	root = filepath.Clean(root)
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("file store root %s exists but is not a directory", root)
	}
	f := &File{root: root, mode: SyncPerFile}
	for _, o := range opts {
		o(f)
	}
	f.setUpSync()
	return f, nil
}

// Root is the store's root directory.
func (f *File) Root() string { return f.root }

func (f *File) String() string { return "file://" + filepath.ToSlash(f.root) }

func (f *File) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(f.root, filepath.FromSlash(key)), nil
}

// notFound maps the errors that mean "no such object" (a missing file, a path
// component that is a file, a directory where the object would be) to
// ErrNotFound.
func (f *File) notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%s: %q: %w", f, key, ErrNotFound)
	}
	return fmt.Errorf("%s: %q: %w", f, key, err)
}

func (f *File) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	fh, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, f.notFound(key, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, f.notFound(key, err)
	}
	if fi.IsDir() {
		return nil, f.notFound(key, syscall.EISDIR)
	}
	// Published files never change (a replacement is a new inode), so the
	// size from fstat is exact.
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, fmt.Errorf("%s: get %q: %w", f, key, err)
	}
	return data, nil
}

type fileObject struct {
	*os.File
	size int64
}

func (o fileObject) Size() int64 { return o.size }

func (f *File) Open(ctx context.Context, key string) (Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	fh, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, f.notFound(key, err)
	}
	fi, err := fh.Stat()
	if err == nil && fi.IsDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		fh.Close()
		return nil, f.notFound(key, err)
	}
	return fileObject{File: fh, size: fi.Size()}, nil
}

func (f *File) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	p, err := f.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && fi.IsDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		return ObjectInfo{}, f.notFound(key, err)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// writeTemp writes r into a new temporary file next to final, flushes it
// (flushWritten: fsynced, or left to the group rounds) and returns its path
// and how the put makes its steps durable. The temporary name is unique
// (O_EXCL; a per-process random part and a counter, so no random read per
// put). The directory is created (mkdirAll) only when the open says it is
// missing: an existing directory costs no stat.
func (f *File) writeTemp(ctx context.Context, final string, r io.Reader, size int64) (string, putSync, error) {
	dir := filepath.Dir(final)
	base := filepath.Base(final)
	tmp := tempName(dir, base)
	fh, err := openFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	var made []newDir // the directories this write created, to fsync into their parents
	if err == nil {
		knownDirs.add(f.root, dir)
	} else if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		knownDirs.drop(dir) // if it was cached, it vanished since
		if merr := f.mkdirAll(ctx, dir, &made); merr != nil {
			f.syncNewDirs(made) // end the creations; the write fails anyway
			return "", putSync{}, merr
		}
		fh, err = openFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		f.syncNewDirs(made)
		return "", putSync{}, err
	}
	fail := func(err error) (string, putSync, error) {
		fh.Close()
		os.Remove(tmp)
		f.syncNewDirs(made)
		return "", putSync{}, err
	}
	var n int64
	if br, ok := r.(*bytes.Reader); ok {
		n, err = br.WriteTo(fh) // one write: the bytes are in memory already
	} else {
		bp := copyBufs.Get().(*[]byte)
		n, err = io.CopyBuffer(writerOnly{fh}, ctxReader{ctx: ctx, r: r}, *bp)
		copyBufs.Put(bp)
	}
	if err != nil {
		return fail(err)
	}
	if size >= 0 && n != size {
		return fail(fmt.Errorf("the body had %d bytes, expected %d", n, size))
	}
	ps, err := f.flushWritten(fh)
	if err != nil {
		return fail(err)
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		f.syncNewDirs(made)
		return "", putSync{}, err
	}
	// The file is flushed: now the new directories' entries, whose journal
	// commit the file's fsync has most likely carried already (mkdirAll),
	// or, in group mode, the round before publishing.
	if err := ps.createdDirs(made); err != nil {
		os.Remove(tmp)
		return "", putSync{}, err
	}
	return tmp, ps, nil
}

// Put writes key atomically: a reader sees the old object or the whole new
// one, never a partial file (temp + fsync + rename).
func (f *File) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return f.put(ctx, key, r, size, false)
}

// put is Put, or with owed PutOwed's (owed.go): in rounds the rename
// waits for none.
func (f *File) put(ctx context.Context, key string, r io.Reader, size int64, owed bool) error {
	r = orEmpty(r)
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, ps, err := f.writeTemp(ctx, p, r, size)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", f, key, err)
	}
	if owed && ps.g != nil {
		return f.publishOwed(key, p, tmp, ps)
	}
	if err := ps.beforePublish(ctx, filepath.Dir(p)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: put %q: sync before publishing: %w", f, key, err)
	}
	if err := ctx.Err(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := f.awaitDirs(ctx, filepath.Dir(p), ps.g); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: put %q: %w", f, key, err)
	}
	if err := f.renameTemp(key, tmp, p); err != nil {
		return err
	}
	if err := ps.afterPublish(ctx, filepath.Dir(p)); err != nil {
		return fmt.Errorf("%s: put %q: sync directory: %w", f, key, err)
	}
	return nil
}

// renameTemp publishes the temporary file tmp as p (key's), removing it
// if that fails.
func (f *File) renameTemp(key, tmp, p string) error {
	err := renameFile(tmp, p)
	if err == nil {
		return nil
	}
	os.Remove(tmp)
	if errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%s: put %q: %w", f, key, errDirHoldsObjects)
	}
	return fmt.Errorf("%s: put %q: %w", f, key, err)
}

// PutIfAbsent publishes a fully written, fsynced temporary file under key with
// renameat2(2) and RENAME_NOREPLACE (link(2) where the filesystem lacks
// it), which fails with EEXIST when key exists: the kernel decides the
// race, and an existing file is never replaced (rename(2) would replace it).
func (f *File) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, ps, err := f.writeTemp(ctx, p, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("%s: put-if-absent %q: %w", f, key, err)
	}
	published := false
	defer func() {
		if !published {
			os.Remove(tmp)
		}
	}()
	if err := ps.beforePublish(ctx, filepath.Dir(p)); err != nil {
		return fmt.Errorf("%s: put-if-absent %q: sync before publishing: %w", f, key, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.awaitDirs(ctx, filepath.Dir(p), ps.g); err != nil {
		return fmt.Errorf("%s: put-if-absent %q: %w", f, key, err)
	}
	moved, err := f.publishNoReplace(tmp, p)
	published = moved
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrExist):
			if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
				return fmt.Errorf("%s: put-if-absent %q: %w", f, key, errDirHoldsObjects)
			}
			return fmt.Errorf("%s: put-if-absent %q: %w", f, key, ErrExists)
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EXDEV):
			return fmt.Errorf("%s: put-if-absent %q: this filesystem does not support hard links (%v): %w", f, key, err, ErrUnsupported)
		}
		return fmt.Errorf("%s: put-if-absent %q: %w", f, key, err)
	}
	// The new name is the commit point; make its directory entry durable
	// before acknowledging. After a link, removing the temporary name needs
	// no sync: a leftover temp file after a crash is ignored by List and
	// harmless.
	if err := ps.afterPublish(ctx, filepath.Dir(p)); err != nil {
		return fmt.Errorf("%s: put-if-absent %q: sync directory: %w", f, key, err)
	}
	return nil
}

// Delete removes key. Empty parent directories are left in place: removing
// them would race with a concurrent writer creating a file in them.
func (f *File) Delete(ctx context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("%s: delete %q: %w", f, key, err)
	}
	if fi.IsDir() {
		return nil // not an object
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: delete %q: %w", f, key, err)
	}
	return nil
}

// tempRun is this process's random part of temporary names, read once;
// tempSeq numbers the temporary files it creates.
var (
	tempRun = sync.OnceValue(func() string {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			panic(fmt.Sprintf("store: reading randomness for temporary names: %v", err))
		}
		return hex.EncodeToString(rnd[:])
	})
	tempSeq atomic.Uint64
)

// tempName is a temporary name for base in dir that no other writer uses:
// the random part tells processes apart, the counter this process's files.
func tempName(dir, base string) string {
	return filepath.Join(dir, tempPrefix+base+"."+tempRun()+strconv.FormatUint(tempSeq.Add(1), 36)+tempSuffix)
}

// syncDir fsyncs dir, sharing the fsync with the other writes of the
// process that need one of dir at the same time (dirsync.go).
func (f *File) syncDir(dir string) error {
	fsync := fsyncDir
	if f.dirFsync != nil {
		fsync = f.dirFsync
	}
	if f.auto != nil {
		inner := fsync
		fsync = func(dir string) error { return f.auto.fsync(func() error { return inner(dir) }) }
	}
	return syncDirShared(dir, fsync)
}

// openFile is os.OpenFile for the store's regular files without the
// runtime poller's set-up: os.OpenFile makes every descriptor non-blocking
// (two fcntl calls), tries to register it with the poller (an epoll_ctl
// that fails for a regular file) and makes it blocking again (two more),
// five calls per open that a regular file's reads and writes, which never
// wait on the poller, do not use. os.NewFile over open(2)'s descriptor
// costs one fcntl. Errors are os.OpenFile's (*fs.PathError, "open path: …").
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// renameFile is rename(2) of a temporary file onto its key. os.Rename
// lstats the new name first (a directory there is reported as EEXIST, as
// on Windows): one call per put that the kernel's own answer, EISDIR,
// makes unnecessary.
func renameFile(from, to string) error {
	for {
		err := unix.Rename(from, to)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
		return nil
	}
}

// publishNoReplace gives the temporary file tmp the name p unless p
// exists (the error is then link(2)'s EEXIST, which callers classify).
// moved reports that tmp's name is gone (renamed): a link leaves it for
// the caller to remove. renameat2 with RENAME_NOREPLACE is one atomic
// call where link(2) and unlink(2) are two, each a change to the
// directory that the next flush writes.
func (f *File) publishNoReplace(tmp, p string) (moved bool, err error) {
	if !f.linkOnly.Load() {
		for {
			err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p, unix.RENAME_NOREPLACE)
			switch err {
			case unix.EINTR:
				continue
			case nil:
				return true, nil
			case unix.EINVAL, unix.ENOSYS, unix.ENOTSUP:
				f.linkOnly.Store(true)
			default:
				return false, &os.LinkError{Op: "rename", Old: tmp, New: p, Err: err}
			}
			break
		}
	}
	return false, os.Link(tmp, p)
}

// errDirHoldsObjects is a put onto a key that is a directory: the key "x"
// when keys "x/..." exist.
var errDirHoldsObjects = errors.New("a directory of that name holds other objects, so this key cannot be stored")

// copyBufs recycles the buffers of streamed puts (io.Copy into an
// *os.File allocated 32 KiB per put).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// writerOnly hides *os.File's ReaderFrom, which would ignore the buffer
// given to io.CopyBuffer and allocate its own.
type writerOnly struct{ io.Writer }

// ctxReader stops a long copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// orEmpty lets Put take a nil reader for an empty body.
func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return bytes.NewReader(nil)
	}
	return r
}

// RemoveStaleTemp deletes temporary files older than olderThan anywhere
// under the root and returns how many it removed. A crash between writing a
// temporary file and publishing it leaves one behind; List never shows it,
// so only this sweeps it up (lake maintenance calls it). The age guard keeps
// it away from writes in progress.
func (f *File) RemoveStaleTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !isTempName(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			removed++
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("%s: removing stale temporary files: %w", f, err)
	}
	return removed, nil
}

package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// List reads the directory that contains prefix (the part up to its last
// '/') and the directories below it that can hold a matching key, keeps
// regular files whose keys start with prefix and sort after startAfter,
// skips temporary files, and sorts by key bytes like S3 does. Symbolic
// links are neither followed nor listed.
//
// Each directory is opened once, relative to its parent's descriptor, read
// with getdents64 into a pooled buffer, and each file kept is stat'ed
// relative to it (fstatat): a filepath.WalkDir resolved the whole path
// again for the directory and for every file, and made an os.File and
// its DirEntries for each directory. doctor and lake status list every
// table's log (20,000 logs at 5,000 tenants, two or three files each) and
// every tenant's witnesses; the walk was about 40% of a doctor run's CPU
// there. BenchmarkFileList (filelist_internal_test.go) has the two side
// by side: about a quarter less CPU per listing, all of what is left in
// the system calls themselves.
func (f *File) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	base, start, err := f.listStart(prefix)
	if err != nil {
		return nil, err
	}
	l := lister{ctx: ctx, prefix: prefix, startAfter: startAfter}
	fd, err := openDirNoFollow(unix.AT_FDCWD, start)
	switch {
	case missingDir(err):
		return nil, nil // no such directory, or a file or link where it would be: nothing below it
	case err != nil:
		return nil, fmt.Errorf("%s: list %q: %w", f, prefix, &os.PathError{Op: "open", Path: start, Err: err})
	}
	if err := l.dir(fd, start, base); err != nil {
		return nil, fmt.Errorf("%s: list %q: %w", f, prefix, err)
	}
	sort.Slice(l.out, func(i, j int) bool { return l.out[i].Key < l.out[j].Key })
	return l.out, nil
}

// listStart is where a listing of prefix starts: the key of the directory
// that contains it (the part up to its last '/') and its path.
func (f *File) listStart(prefix string) (base, start string, err error) {
	if err := validatePrefix(prefix); err != nil {
		return "", "", err
	}
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = prefix[:i]
	}
	return base, filepath.Join(f.root, filepath.FromSlash(base)), nil
}

// lister is one List's walk.
type lister struct {
	ctx                context.Context
	prefix, startAfter string
	out                []ObjectInfo
}

// dir lists the open directory fd (path, for errors; rel, its key, "" for
// the root) and closes it.
func (l *lister) dir(fd int, path, rel string) error {
	defer unix.Close(fd)
	if err := l.ctx.Err(); err != nil {
		return err
	}
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	for {
		n, err := readDirents(fd, *bp)
		if err != nil {
			return &os.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n == 0 {
			return nil
		}
		for buf := (*bp)[:n]; len(buf) > 0; {
			name, typ, next, ok := parseDirent(buf)
			if !ok {
				return &os.PathError{Op: "readdirent", Path: path, Err: errors.New("a malformed directory entry")}
			}
			buf = next
			if name == "." || name == ".." || name == "" {
				continue
			}
			if err := l.entry(fd, path, rel, name, typ); err != nil {
				return err
			}
		}
	}
}

// entry lists one directory entry of dir fd: a directory below it that
// can hold a matching key, or a regular file whose key matches.
func (l *lister) entry(fd int, path, rel, name string, typ byte) error {
	if typ == unix.DT_UNKNOWN { // a file system that does not say: ask
		st, ok, err := lstatEntry(fd, path, name)
		if !ok {
			return err
		}
		typ = direntType(st.Mode)
	}
	key := name
	if rel != "" {
		key = rel + "/" + name
	}
	switch typ {
	case unix.DT_DIR:
		// Prune directories that cannot hold a matching key.
		if !strings.HasPrefix(key+"/", l.prefix) && !strings.HasPrefix(l.prefix, key+"/") {
			return nil
		}
		sub, err := openDirNoFollow(fd, name)
		if missingDir(err) {
			return nil // removed (or replaced) while listing
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: filepath.Join(path, name), Err: err}
		}
		return l.dir(sub, filepath.Join(path, name), key)
	case unix.DT_REG:
		if isTempName(name) || !strings.HasPrefix(key, l.prefix) || key <= l.startAfter {
			return nil
		}
		st, ok, err := lstatEntry(fd, path, name)
		if !ok {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil // replaced by something else while listing
		}
		l.out = append(l.out, ObjectInfo{Key: key, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix())})
	}
	return nil // a link, a device, a socket: not an object
}

// direntBufs are getdents buffers, one per directory being read.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// readDirents is getdents64 into buf: 0 at the end of the directory.
func readDirents(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// parseDirent splits the first linux_dirent64 off buf: d_ino (8 bytes),
// d_off (8), d_reclen (2), d_type (1), then the name, NUL-terminated.
func parseDirent(buf []byte) (name string, typ byte, rest []byte, ok bool) {
	const nameOff = 19
	if len(buf) < nameOff {
		return "", 0, nil, false
	}
	reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
	if reclen < nameOff || reclen > len(buf) {
		return "", 0, nil, false
	}
	raw := buf[nameOff:reclen]
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	return string(raw), buf[18], buf[reclen:], true
}

// direntType is the d_type of a file of mode m.
func direntType(m uint32) byte {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	}
	return unix.DT_LNK // anything else is not listed; only DIR and REG are looked at
}

// openDirNoFollow opens the directory name (relative to dirfd) for
// reading, without following a symbolic link in its last component (as a
// walk from the parent would not).
func openDirNoFollow(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// lstatEntry is lstat of the entry name of directory dirfd (path, for
// errors); ok is false when it is gone (removed while listing: err nil) or
// cannot be stat'ed (err).
func lstatEntry(dirfd int, path, name string) (st unix.Stat_t, ok bool, err error) {
	err = statAt(dirfd, name, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return st, false, nil
	case err != nil:
		return st, false, &os.PathError{Op: "lstat", Path: filepath.Join(path, name), Err: err}
	}
	return st, true, nil
}

// statAt is lstat of name in the directory dirfd.
func statAt(dirfd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// missingDir: the directory is not there to list (gone, never made, or a
// file or a symbolic link where it would be).
func missingDir(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// walkList is File.List as it was before filelist.go: a filepath.WalkDir
// of the prefix's directory. It is the oracle the descriptor-relative
// listing must agree with.
func (f *File) walkList(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	_, start, err := f.listStart(prefix)
	if err != nil {
		return nil, err
	}
	var out []ObjectInfo
	err = filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if p == start {
				return nil
			}
			rel := filepath.ToSlash(strings.TrimPrefix(p, f.root+string(filepath.Separator)))
			if !strings.HasPrefix(rel+"/", prefix) && !strings.HasPrefix(prefix, rel+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || isTempName(d.Name()) {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, f.root+string(filepath.Separator)))
		if !strings.HasPrefix(rel, prefix) || rel <= startAfter {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: rel, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// A random tree of nested directories, files, temporary files, symbolic
// links (to files and to directories) and empty directories, listed under
// many prefixes and start keys: the listing and the walk agree on every
// key, size and modification time.
func TestFileList_RandomTrees_SameAsTheWalk(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 20; seed++ {
		root := t.TempDir()
		f, err := NewFile(root)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(seed, 7))
		names := []string{"a", "b", "_delta_log", "00000000000000000001.json", "part-0", "x.y", "a b"}
		var keys []string
		dirs := []string{""}
		for i := 0; i < 60; i++ {
			dir := dirs[rng.IntN(len(dirs))]
			name := names[rng.IntN(len(names))]
			if rng.IntN(3) == 0 {
				name += fmt.Sprint(rng.IntN(10))
			}
			p := filepath.Join(root, dir, name)
			rel := strings.TrimPrefix(dir+"/"+name, "/")
			switch rng.IntN(6) {
			case 0, 1:
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, rel)
				}
			case 2:
				_ = os.Symlink(filepath.Join(root, dirs[rng.IntN(len(dirs))]), p)
			case 3:
				require.NoError(t, os.WriteFile(tempName(filepath.Join(root, dir), name), []byte("t"), 0o644))
			default:
				if os.WriteFile(p, make([]byte, rng.IntN(100)), 0o644) == nil {
					keys = append(keys, rel)
					at := time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9))
					require.NoError(t, os.Chtimes(p, at, at)) // a modification time of its own, not the change time
				}
			}
		}
		require.NotEmpty(t, keys)
		prefixes := []string{"", "a", "a/", "b/", "_delta_log/", "nosuch/", "a/b/", "00000000000000000001.json/"}
		for _, d := range dirs {
			prefixes = append(prefixes, d+"/", d+"/a", d+"/_")
		}
		for _, k := range keys {
			prefixes = append(prefixes, k, k+"/") // a file where the directory would be
		}
		for _, p := range prefixes {
			if validatePrefix(p) != nil {
				continue
			}
			for _, after := range []string{"", p, p + "a", keys[rng.IntN(len(keys)+1)%max(len(keys), 1)]} {
				want, werr := f.walkList(ctx, p, after)
				got, gerr := f.List(ctx, p, after)
				require.NoError(t, werr)
				require.NoError(t, gerr, "seed %d prefix %q", seed, p)
				require.Equal(t, want, got, "seed %d prefix %q after %q", seed, p, after)
			}
		}
	}
}

// The prefix's directory is a symbolic link: the walk did not follow it,
// and neither does the listing (a link in the lake is not an object).
func TestFileList_PrefixDirectoryIsALink_NothingListed(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real", "f"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")))
	f, err := NewFile(root)
	require.NoError(t, err)
	got, err := f.List(context.Background(), "link/", "")
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = f.List(context.Background(), "real/", "")
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// BenchmarkFileList lists 2,000 Delta logs of three files each (a
// drained table's log from its checkpoint on), four at a time as a lake
// read does: the descriptor-relative listing against the walk it
// replaced, in the same run (cpu-ms/op: the process's CPU per pass, the
// figure that matters on a shared machine).
func BenchmarkFileList(b *testing.B) {
	root := b.TempDir()
	f, err := NewFile(root)
	require.NoError(b, err)
	const logs = 2000
	for i := range logs {
		dir := filepath.Join(root, fmt.Sprintf("t%04d", i), "bronze", "events", "_delta_log")
		require.NoError(b, os.MkdirAll(dir, 0o755))
		for _, n := range []string{"00000000000000000000.json", "00000000000000000001.json", "_last_checkpoint"} {
			require.NoError(b, os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644))
		}
	}
	ctx := context.Background()
	for _, v := range []struct {
		name string
		list func(context.Context, string, string) ([]ObjectInfo, error)
	}{{"walk", f.walkList}, {"fd-relative", f.List}} {
		b.Run(v.name, func(b *testing.B) {
			cpu0 := processCPU(b)
			for b.Loop() {
				sem := make(chan struct{}, FileConcurrency)
				errs := make(chan error, logs)
				for i := range logs {
					sem <- struct{}{}
					go func() {
						defer func() { <-sem }()
						got, err := v.list(ctx, fmt.Sprintf("t%04d/bronze/events/_delta_log/", i), "")
						if err == nil && len(got) != 3 {
							err = fmt.Errorf("listed %d files, want 3", len(got))
						}
						errs <- err
					}()
				}
				for range logs {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// A file system that gives no entry types (DT_UNKNOWN: some network and
// FUSE ones): each entry is stat'ed, and files and directories are listed
// as when the type is given; links still are not.
func TestFileList_EntryTypeUnknown_StatedAndListedTheSame(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "f"), []byte("abc"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "sub", "g"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(root, "d", "f"), filepath.Join(root, "d", "link")))
	fd, err := openDirNoFollow(unix.AT_FDCWD, filepath.Join(root, "d"))
	require.NoError(t, err)
	defer unix.Close(fd)
	l := lister{ctx: context.Background(), prefix: "d/"}
	for _, name := range []string{"f", "sub", "link", "gone"} {
		require.NoError(t, l.entry(fd, filepath.Join(root, "d"), "d", name, unix.DT_UNKNOWN))
	}
	var keys []string
	for _, o := range l.out {
		keys = append(keys, o.Key)
	}
	require.Equal(t, []string{"d/f", "d/sub/g"}, keys)
	require.Equal(t, int64(3), l.out[0].Size)
}

// A directory whose entries take several getdents64 reads (3,000 commits
// in one _delta_log, about 100 KB of entries against a 16 KB buffer):
// every one is listed, in key order, from startAfter on.
func TestFileList_DirectoryLargerThanOneRead_EveryEntryListed(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "_delta_log")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	const n = 3000
	for v := range n {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.json", v)), nil, 0o644))
	}
	f, err := NewFile(root)
	require.NoError(t, err)
	got, err := f.List(context.Background(), "_delta_log/", "")
	require.NoError(t, err)
	require.Len(t, got, n)
	for v, o := range got {
		require.Equal(t, fmt.Sprintf("_delta_log/%020d.json", v), o.Key)
	}
	got, err = f.List(context.Background(), "_delta_log/", fmt.Sprintf("_delta_log/%020d.json", n-2))
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	require.NoError(b, unix.Getrusage(unix.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

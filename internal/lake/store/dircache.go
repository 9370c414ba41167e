package store

import (
	"hash/maphash"
	"os"
	"strings"
	"sync"
)

// The directories this process knows exist, so that creating a directory
// below one of them starts there instead of climbing to it.
//
// Without it, a write that finds its directory missing (its temporary
// file's open fails) climbs from the leaf: os.Mkdir of the leaf fails
// with ENOENT, then of its parent, and so on up to the first directory
// that exists, before creating the chain downward; a new table in a new
// tenant cost three failed os.Mkdir calls and PrepareDir a stat more
// (7 calls of 11 for its 4 directories), and the second table of a tenant
// met the tenant's directory with EEXIST and a stat. With it, a new
// table's directories below a known tenant cost one os.Mkdir each.
//
// The cache says only that a directory exists; it is never asked whether
// one is durable. Durability stays with the registry of creations
// (filedir.go): a directory this process is creating, or whose fsync into
// its parent is owed or failed, is registered there whether or not it is
// cached, and every write waits for the registered creations on its path
// before publishing (awaitDirs). So a cached directory never lets a write
// skip an fsync: the write would have found the same directory with its
// temporary file's open.
//
// A cached directory can vanish behind the cache's back (vacuum, erasure,
// an operator, another process). Nothing trusts an entry without a system
// call that would notice: a write's temporary file is opened first (the
// cache is not asked), and when that open fails the directory is dropped
// from the cache before mkdirAll; mkdirAll's os.Mkdir below a cached
// ancestor fails with ENOENT if that ancestor vanished, which drops it and
// retries one level up, down to the climb from the leaf. A stale entry
// costs one failed call, once.
//
// It is bounded: two generations of knownDirsGeneration entries each; a
// hit in the old one moves the entry to the new one, and when the new one
// is full it becomes the old one. An entry is a 64-bit hash of the path
// (about 16 bytes in the map, a few megabytes at most whatever the number
// of tables), so a generation holds all the directories a 10,000-tenant
// drain makes (13 a tenant) in the time between a tenant's first table
// and its last. A collision (2^-64 with a per-process seed) makes a
// missing directory look known, which costs what a vanished one does: one
// failed os.Mkdir, or PrepareDir leaving the directory to the first write
// below it.
//
// Rejected: a negative cache (a directory known missing, to os.Mkdir it
// without trying the open first): another process or an earlier run may
// have made it, and an os.Mkdir that fails with EEXIST must then fsync the
// parent (it cannot tell an old directory from one another process is
// still creating), one fsync per directory per process where the open
// costs nothing. Caching per File: two File values over one tree (a lake
// and one of its tables opened by URL) would each climb. Keeping the
// paths: 4,096 of them per generation (a megabyte) were evicted before a
// drain's later tables of a tenant came, which then met its directory
// with EEXIST and a stat again.
var knownDirs = dirCache{seed: maphash.MakeSeed(), cur: map[uint64]struct{}{}}

const knownDirsGeneration = 1 << 16

type dirCache struct {
	seed     maphash.Seed
	mu       sync.Mutex
	cur, old map[uint64]struct{}
}

// has reports whether dir is known to exist.
func (c *dirCache) has(dir string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hasLocked(dir)
}

func (c *dirCache) hasLocked(dir string) bool {
	h := maphash.String(c.seed, dir)
	if _, ok := c.cur[h]; ok {
		return true
	}
	if _, ok := c.old[h]; ok {
		c.putLocked(h)
		return true
	}
	return false
}

// add records that dir exists, and with it its ancestors down to root (each
// exists if dir does), up to the first one already known.
func (c *dirCache) add(root, dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := dir; len(d) >= len(root) && !c.hasLocked(d); {
		c.putLocked(maphash.String(c.seed, d))
		p := parentOf(d)
		if p == d {
			return
		}
		d = p
	}
}

func (c *dirCache) putLocked(h uint64) {
	if len(c.cur) >= knownDirsGeneration {
		c.old, c.cur = c.cur, make(map[uint64]struct{}, knownDirsGeneration/4)
	}
	c.cur[h] = struct{}{}
}

// drop forgets dir: it was found missing.
func (c *dirCache) drop(dir string) {
	h := maphash.String(c.seed, dir)
	c.mu.Lock()
	delete(c.cur, h)
	delete(c.old, h)
	c.mu.Unlock()
}

// knownAncestor is the deepest of dir's strict ancestors, root included,
// that is known to exist; "" when none is.
func (c *dirCache) knownAncestor(root, dir string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := dir; len(d) > len(root); {
		p := parentOf(d)
		if p == d {
			return ""
		}
		if c.hasLocked(p) {
			return p
		}
		d = p
	}
	return ""
}

// parentOf is filepath.Dir of a clean absolute path without its copy: a
// substring, "/" for a top-level directory.
func parentOf(dir string) string {
	i := strings.LastIndexByte(dir, os.PathSeparator)
	if i <= 0 {
		return dir[:1]
	}
	return dir[:i]
}

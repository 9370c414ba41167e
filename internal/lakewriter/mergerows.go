package lakewriter

import (
	"container/list"
	"sync"
	"time"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// mergeRows keeps the rows of the data files this writer's MERGEs
// (silver's and gold/workareas') wrote and committed, so that the next
// MERGE of the same table reads a file it rewrites, or looks for its keys
// in, from memory instead of opening and decoding it again: in steady
// state a workareas commit rewrites the files its previous commit wrote.
//
// Why a cached file's rows are the file's rows:
//
//   - An entry is keyed by the table and the data file's path as the log
//     names it, and is used only for a file the snapshot being merged lists
//     as live under that exact path with the same size. A data file is
//     never changed once written (the Delta protocol's rule, and every
//     writer here, delta.Writer.WriteFile, names a new file
//     part-00000-<random UUID>: the lake writer, optimize, erasure's
//     rewrite, rebuild and repair). So the path names one content for the
//     file's whole life, which is the rows put here. A remove and an add of
//     the same path later (a Delta RESTORE) names the same immutable file.
//   - What other writers do cannot make an entry wrong, only unused: a
//     second lake writer, optimize or erasure (oml lake optimize/maintain,
//     which null an erased claim's body) replace a file by a new path and
//     remove the old one, and the snapshot then no longer lists it.
//   - An entry is put only after its commit landed (a failed or ambiguous
//     commit's files are left out: the retry writes new ones), and the files
//     a commit removes are dropped at once, to free the memory (an entry
//     of a removed file is merely unused: the snapshot no longer lists it).
//   - A miss (never written here, evicted, written before a restart) reads
//     the file from the store as before.
//
// The entries hold the rows as written, not as a read would decode them
// (a list is []string, not []any; a time keeps its zone): the MERGE only
// matches their keys and writes them again, which encodes both alike.
// Bounded by estimated bytes, least recently used evicted first, except
// that a silver file goes in at the least recently used end: it is kept
// only in room no other file needs, and moves to the front once a MERGE
// used it. A silver file holds the claims a batch inserted and is read
// again only by a later retract of one of them, while a gold/workareas
// file is the whole table its next MERGE rewrites (mergesWhole). Kept
// like the others, silver's files held two thirds of the cache and served
// under 1% of its hits at 10,000 tenants; kept this way, the workareas
// MERGEs found their file a third of the time instead of a ninth
// (docs/lake-writer.md, session 25). Safe for the tables committed in
// parallel.
type mergeRows struct {
	mu      sync.Mutex
	budget  int64
	bytes   int64
	lru     *list.List // of *mergeEntry, most recently used first
	entries map[mergeKey]*list.Element

	// hits and misses by table kind (kindCounter: the lag benchmark reports
	// which tables' kept files are used); counts sums them.
	hits, misses [kindCounters]int64
	evictions    int64
}

// kindCounters is a counter per table kind and one for any other (never seen:
// only silver and gold/workareas MERGE).
const kindCounters = tables.NumKinds + 1

// kindCounter is the index of kind's counter in mergeRows.
func kindCounter(kind tables.Kind) int {
	if i, ok := kind.Index(); ok {
		return i
	}
	return tables.NumKinds
}

type mergeKey struct {
	table tables.TableKey
	path  string // delta.Add.Path, as the log spells it
}

type mergeEntry struct {
	key   mergeKey
	size  int64 // the file's size (delta.Add.Size)
	rows  []pq.Row
	bytes int64
}

// writtenFile is a data file a MERGE wrote and the rows it holds, for
// mergeRows once the commit lands.
type writtenFile struct {
	add  *delta.Add
	rows []pq.Row
}

// newMergeRows returns a cache of at most budget bytes (≤ 0: nil, which
// caches nothing).
func newMergeRows(budget int64) *mergeRows {
	if budget <= 0 {
		return nil
	}
	return &mergeRows{budget: budget, lru: list.New(), entries: map[mergeKey]*list.Element{}}
}

// get returns the rows of live file f of table, if cached. They are the
// cache's: read them, edit a copy (cloneRows).
func (c *mergeRows) get(table tables.TableKey, f *delta.Add) ([]pq.Row, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[mergeKey{table, f.Path}]
	if !ok || el.Value.(*mergeEntry).size != f.Size {
		c.misses[kindCounter(table.Kind)]++
		return nil, false
	}
	c.hits[kindCounter(table.Kind)]++
	c.lru.MoveToFront(el)
	return el.Value.(*mergeEntry).rows, true
}

// cloneRows copies each row (not the values: a MERGE sets a row's columns,
// it does not change a value in place).
func cloneRows(rows []pq.Row) []pq.Row {
	out := make([]pq.Row, len(rows))
	for i, r := range rows {
		out[i] = append(pq.Row(nil), r...)
	}
	return out
}

// committed records what a commit of table that landed did: the files it
// wrote (their rows are the cache's from now on, never changed again) and
// the files it removed.
func (c *mergeRows) committed(table tables.TableKey, commit *delta.Commit, written []writtenFile) {
	if c == nil || (len(written) == 0 && len(commit.Removes) == 0) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range commit.Removes {
		if el, ok := c.entries[mergeKey{table, rm.Path}]; ok {
			c.dropLocked(el)
		}
	}
	for _, wf := range written {
		k := mergeKey{table, wf.add.Path}
		if el, ok := c.entries[k]; ok {
			c.dropLocked(el) // (never: paths are unique)
		}
		e := &mergeEntry{key: k, size: wf.add.Size, rows: wf.rows, bytes: rowsBytes(wf.rows)}
		if e.bytes > c.budget/4 {
			continue // one file would crowd out the rest
		}
		if table.Kind == tables.Silver {
			c.entries[k] = c.lru.PushBack(e) // kept only in room no other file needs (see above)
		} else {
			c.entries[k] = c.lru.PushFront(e)
		}
		c.bytes += e.bytes
	}
	for c.bytes > c.budget {
		c.dropLocked(c.lru.Back())
		c.evictions++
	}
}

func (c *mergeRows) dropLocked(el *list.Element) {
	e := c.lru.Remove(el).(*mergeEntry)
	delete(c.entries, e.key)
	c.bytes -= e.bytes
}

// mergeRowsCounts are the cache's counters (Summary, tests).
type mergeRowsCounts struct {
	Hits, Misses, Evictions int64
	Files                   int
	Bytes                   int64
}

func (c *mergeRows) counts() mergeRowsCounts {
	if c == nil {
		return mergeRowsCounts{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := mergeRowsCounts{Evictions: c.evictions, Files: len(c.entries), Bytes: c.bytes}
	for i := range kindCounters {
		out.Hits += c.hits[i]
		out.Misses += c.misses[i]
	}
	return out
}

// mergeEntryBytes is an entry's own cost beyond its rows: the list
// element, the map slot and the entry.
const mergeEntryBytes = 160

// rowsBytes estimates the heap the rows hold: slice headers, one
// interface per value, and what the values point to.
func rowsBytes(rows []pq.Row) int64 {
	n := int64(mergeEntryBytes + 24*len(rows))
	for _, r := range rows {
		n += 16 * int64(cap(r))
		for _, v := range r {
			n += valueBytes(v)
		}
	}
	return n
}

func valueBytes(v any) int64 {
	switch x := v.(type) {
	case nil, bool, int8, int16, int32:
		return 0
	case int64, float64:
		return 8
	case string:
		return 16 + int64(len(x))
	case []byte:
		return 24 + int64(cap(x))
	case time.Time:
		return 24
	case []string:
		n := int64(24 + 16*cap(x))
		for _, s := range x {
			n += int64(len(s))
		}
		return n
	case []any:
		n := int64(24 + 16*cap(x))
		for _, e := range x {
			n += valueBytes(e)
		}
		return n
	}
	return 64 // a value of another kind (a struct, a map): a guess
}

package lakewriter

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// registry keeps open Delta writers, so a table's snapshot stays in memory
// between batches and its log is re-read only after a lost race — but at
// most maxOpen of them: with many tenants, one writer per table would make
// the lake writer's memory grow with the number of tables (about 6 KB per
// small table, 27,000 tables at 10,000 tenants). Beyond maxOpen the least
// recently used writer is closed; the next time a batch touches its table
// it is rebuilt from its compact state (states, below; silver's and
// gold/workareas' hold their live files, which their MERGE needs) or,
// without one, reopened from its log (checkpoint plus the commits since).
//
// Dropping a writer is always safe: a writer holds no lock and no
// uncommitted state between uses, and a writer reopened from the log knows
// at least what the dropped one knew (the log is the authority; a commit
// against a stale snapshot loses the put-if-absent race and is redone).
// The drainer applies a table from one goroutine at a time, so an evicted
// writer still in use by its goroutine is not duplicated by a concurrent
// reopen of the same table.
type registry struct {
	lake store.Store
	opts delta.Options
	// lean opens the append-only tables (bronze, gold) with lean Delta
	// writers: the lake writer only appends to them and needs their txn
	// version, not their file list, so memory does not grow with their
	// file count. Silver keeps its list: MERGE prunes files by stats.
	lean bool

	// maxOpen bounds the writers kept open (≤ 0: no bound).
	maxOpen int
	// budget bounds the estimated bytes of the open writers' snapshots
	// (delta.Snapshot.ApproxBytes; ≤ 0: no bound); open is their sum.
	budget int64
	open   int64

	mu      sync.Mutex
	writers map[tables.TableKey]*list.Element // of *openTable, most recent first
	// absent holds tables the start-up scan read and found missing: the
	// first writer of one is a NewTable writer at once, without reading
	// (listing) the table's log a second time. A table someone else
	// created since loses nothing: the version-0 commit is put-if-absent
	// like any other and loses that race (applyTable redoes its part).
	// Kept per tenant (tablerecords.go): it holds most tables at the
	// start of a drain into a new lake.
	absent tableSet
	lru    list.List
	// evictions counts writers closed to stay within maxOpen.
	evictions int64

	// states holds the compact state (delta.TableState) of tables whose
	// writers were evicted, so reopening one costs a read of its newest
	// commit instead of its log (a listing, the checkpoint hint, the
	// checkpoint and up to a hundred commits): nearly every commit of
	// 10,000 tenants writing a trickle reopens its table. A lean table's
	// (bronze, gold) is about 300 bytes; a MERGE table's (silver,
	// gold/workareas) also holds its live files with their stats (a few KB;
	// one with more than delta.MaxStateFiles files, or whose state would
	// take more than maxStateShare of stateBudget, gets none), and its
	// rebuild also checks that no commit followed the state's. A writer rebuilt from one is the writer the log gives, or
	// the rebuild reads the log (delta.ReopenWriter's fence); a stale
	// state (another writer committed since) is settled by the commit's
	// put-if-absent like a stale open writer. Bounded by stateBudget
	// bytes: beyond it a MERGE table's state goes first (each saves one
	// log read, and a lean one costs a tenth of the bytes), then an
	// arbitrary one. fullKeys are the MERGE tables' states' keys, so that
	// finding one to drop never scans the lean ones (a scan of all the
	// states, tens of thousands of lean ones among few MERGE ones, at
	// every put over the budget; removing it did not measurably change a
	// 20,000-tenant drain, whose added CPU is garbage collection:
	// docs/lake-writer.md, session 17).
	//
	// The MERGE tables' states hold at most fullStateShare of stateBudget
	// (fullBytes): they are the states that keep their files' actions,
	// stats included, alive on the heap, and a 20,000-tenant drain that
	// let them fill the whole budget spent 42% of its CPU in garbage
	// collection (docs/lake-writer.md, "The 20,000-tenant regression").
	states      map[tables.TableKey]delta.TableState
	stateBytes  int64
	fullKeys    map[tables.TableKey]struct{}
	fullBytes   int64
	stateBudget int64
	// noStates keeps no states, leanStatesOnly none of the MERGE tables
	// (tests and benchmarks compare them).
	noStates, leanStatesOnly bool
	// logOpens and stateOpens count tables opened from their logs and
	// rebuilt from their states.
	logOpens, stateOpens int64
}

type openTable struct {
	key   tables.TableKey
	w     *delta.Writer
	bytes int64 // its snapshot's estimated size when last measured
}

// DefaultMaxOpenTables is the default bound on the table writers the lake
// writer keeps open (Options.MaxOpenTables, --max-open-tables).
const DefaultMaxOpenTables = 4096

// oneShotOpenTables bounds the registries of one-shot readers (status, the
// continuity check from outside the writer) that open each table once and
// never come back to it: keeping them all open would only cost memory.
const oneShotOpenTables = 64

// registryOptions say how a registry opens and keeps writers.
type registryOptions struct {
	Delta delta.Options
	// Lean opens bronze and gold with lean Delta writers (registry.lean).
	Lean bool
	// MaxOpen bounds the writers kept open (≤ 0: no bound).
	MaxOpen int
}

func newRegistry(lake store.Store, opts registryOptions) *registry {
	return &registry{lake: lake, opts: opts.Delta, lean: opts.Lean, maxOpen: opts.MaxOpen,
		writers: map[tables.TableKey]*list.Element{}, states: map[tables.TableKey]delta.TableState{}, fullKeys: map[tables.TableKey]struct{}{},
		stateBudget: defaultStateBytes}
}

// defaultStateBytes bounds the compact states of a registry without a
// byte budget; with one (--memory) they get stateShare of it.
const defaultStateBytes = 32 << 20

// stateShare is the divisor of the open writers' byte budget the compact
// states get (half of it: an eighth of --memory, 32 MiB of the default
// 256, room for about 130,000 tables).
const stateShare = 2

// maxStateShare is the divisor of stateBudget that bounds one MERGE
// table's state (a lean one is a few hundred bytes whatever the table): a MERGE table with large stats gets no state rather than
// displacing dozens of others (1/64: 512 KiB of the default 32 MiB).
const maxStateShare = 64

// fullStateShare is the divisor of stateBudget the MERGE tables' states
// may hold together: all of it (32 MiB of the default), as the lean ones
// may; a MERGE table's state is still the first dropped beyond the budget,
// so the lean ones always fit. A quarter (session 19, "The 20,000-tenant
// regression", when the states kept their tombstones) left most of a
// 10,000-tenant steady state's silver and gold/workareas tables to be
// reopened from their logs (8.6% of the lag benchmark's CPU, most of it
// decoding commit JSON); a half (session 22) still left four in five of
// those reopens to the logs at about 9 ms each (session 23, once the
// states had no tombstones); the whole budget left about half
// (docs/lake-writer.md, session 23).
const fullStateShare = 1

// stateSlotBytes is what one state costs in the map beyond its own bytes:
// the key and the map's slot overhead.
const stateSlotBytes = 48

// setBudget bounds the open writers' snapshots by budget bytes (≤ 0: no
// bound) and the compact states by stateShare of it.
func (r *registry) setBudget(budget int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.budget = budget
	if budget > 0 {
		r.stateBudget = budget / stateShare
	}
}

// markAbsent records that the table was just read and does not exist.
func (r *registry) markAbsent(key tables.TableKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.absent.add(key)
}

// takeAbsent reports (once) whether the table was read absent.
func (r *registry) takeAbsent(key tables.TableKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.absent.has(key) {
		return false
	}
	r.absent.remove(key)
	return true
}

// openBytes reports the estimated bytes of the open writers' snapshots.
func (r *registry) openBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// cached returns the open writer of key, marking it most recently used.
func (r *registry) cached(key tables.TableKey) (*delta.Writer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.writers[key]
	if !ok {
		return nil, false
	}
	r.lru.MoveToFront(e)
	return e.Value.(*openTable).w, true
}

// keep registers w as key's writer (or returns the one another goroutine
// registered first) and closes the least recently used writers beyond
// maxOpen.
func (r *registry) keep(key tables.TableKey, w *delta.Writer) *delta.Writer {
	size := w.ApproxBytes()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.writers[key]; ok {
		r.lru.MoveToFront(e)
		return e.Value.(*openTable).w
	}
	r.writers[key] = r.lru.PushFront(&openTable{key: key, w: w, bytes: size})
	r.open += size
	r.evict()
	return w
}

// resized re-measures key's writer after a commit changed its snapshot
// (a silver table keeps its file list) and keeps the budget.
func (r *registry) resized(key tables.TableKey, w *delta.Writer) {
	size := w.ApproxBytes()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.writers[key]
	if !ok {
		// Evicted while this commit ran: the state it gave then (if any)
		// is behind the commit, so a rebuild from it would lose its first
		// commit's race to this one.
		if ts, ok := w.State(); ok {
			r.putState(key, ts)
		}
		return
	}
	if r.budget <= 0 || e.Value.(*openTable).w != w {
		return
	}
	ot := e.Value.(*openTable)
	r.open += size - ot.bytes
	ot.bytes = size
	r.evict()
}

// evict closes the least recently used writers beyond maxOpen or the byte
// budget; the most recently used one always stays (it is in use).
func (r *registry) evict() {
	for r.lru.Len() > 1 && ((r.maxOpen > 0 && r.lru.Len() > r.maxOpen) || (r.budget > 0 && r.open > r.budget)) {
		old := r.lru.Back()
		r.lru.Remove(old)
		ot := old.Value.(*openTable)
		delete(r.writers, ot.key)
		r.open -= ot.bytes
		r.evictions++
		// Never blocks: a writer in the middle of a commit gives no state
		// (resized gives it one when that commit is done).
		if ts, ok := ot.w.State(); ok {
			r.putState(ot.key, ts)
		}
	}
}

// putState keeps key's compact state, replacing an older one, and drops
// states beyond stateBudget. Called with r.mu held.
func (r *registry) putState(key tables.TableKey, ts delta.TableState) {
	if r.noStates || (r.leanStatesOnly && ts.Full()) {
		return
	}
	if old, ok := r.states[key]; ok {
		if old.Version() > ts.Version() {
			return
		}
		r.dropStateLocked(key)
	}
	if ts.Full() && stateBytes(&ts) > r.stateBudget/maxStateShare {
		return
	}
	size := stateBytes(&ts)
	r.states[key] = ts
	r.stateBytes += size
	if ts.Full() {
		r.fullKeys[key] = struct{}{}
		r.fullBytes += size
	}
	for k := range r.fullKeys {
		if r.stateBytes <= r.stateBudget && r.fullBytes <= r.stateBudget/fullStateShare {
			break
		}
		if k != key {
			r.dropStateLocked(k)
		}
	}
	for k := range r.states {
		if r.stateBytes <= r.stateBudget {
			break
		}
		if k != key {
			r.dropStateLocked(k)
		}
	}
}

// dropStateLocked removes and returns key's compact state, keeping the
// bytes the states hold in step. Called with r.mu held.
func (r *registry) dropStateLocked(key tables.TableKey) (delta.TableState, bool) {
	ts, ok := r.states[key]
	if ok {
		delete(r.states, key)
		r.stateBytes -= stateBytes(&ts)
		if ts.Full() {
			r.fullBytes -= stateBytes(&ts)
			delete(r.fullKeys, key)
		}
	}
	return ts, ok
}

// takeState removes and returns key's compact state.
func (r *registry) takeState(key tables.TableKey) (delta.TableState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropStateLocked(key)
}

func stateBytes(ts *delta.TableState) int64 { return ts.ApproxBytes() + stateSlotBytes }

// stats reports the writers open and the evictions so far.
func (r *registry) stats() (open int, evictions int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len(), r.evictions
}

// registryCounts is what a registry did so far (tests, benchmarks, the
// drain's report).
type registryCounts struct {
	Open, States         int
	StateBytes           int64
	FullStates           int // the MERGE tables' states, of States
	FullStateBytes       int64
	Evictions            int64
	LogOpens, StateOpens int64
}

func (r *registry) counts() registryCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return registryCounts{Open: r.lru.Len(), States: len(r.states), StateBytes: r.stateBytes,
		FullStates: len(r.fullKeys), FullStateBytes: r.fullBytes,
		Evictions: r.evictions, LogOpens: r.logOpens, StateOpens: r.stateOpens}
}

// ifMissing says what registry.writer does with a table that does not
// exist yet.
type ifMissing int

const (
	leaveMissing  ifMissing = iota // return (nil, nil)
	createMissing                  // create the table
)

// writer returns the table's writer, opening it, and creating the table
// when it does not exist yet and missing is createMissing; a table left
// missing returns (nil, nil).
func (r *registry) writer(ctx context.Context, key tables.TableKey, missing ifMissing) (*delta.Writer, error) {
	if w, ok := r.cached(key); ok {
		return w, nil
	}
	st, err := key.Store(r.lake)
	if err != nil {
		return nil, err
	}
	opts := r.opts
	opts.Lean = r.lean && key.Kind != tables.Silver && key.Kind != tables.Workareas // a MERGE needs the file list
	var w *delta.Writer
	err = delta.ErrTableNotFound
	if missing != createMissing || !r.takeAbsent(key) {
		w, err = r.openWriter(ctx, key, st, opts)
	}
	if errors.Is(err, delta.ErrTableNotFound) {
		if missing != createMissing {
			return nil, nil
		}
		// The table is created by its first commit (version 0 holds the
		// protocol, the metadata and the batch's rows): one log entry per
		// new table instead of an empty CREATE TABLE commit before it.
		// Another writer creating it first makes that commit lose its
		// put-if-absent race like any other (applyTable redoes it).
		w, err = delta.NewTable(st, key.Spec(), opts)
	}
	if err != nil {
		return nil, fmt.Errorf("open Delta table %s: %w", key, err)
	}
	if err := checkSchema(key, w.Snapshot()); err != nil {
		return nil, err
	}
	return r.keep(key, w), nil
}

// openWriter opens key's writer: rebuilt from its compact state when it has
// one (delta.ReopenWriter reads the log instead when the state's fence
// fails), else from its log.
func (r *registry) openWriter(ctx context.Context, key tables.TableKey, st store.Store, opts delta.Options) (*delta.Writer, error) {
	fromState := false
	var w *delta.Writer
	var err error
	if ts, ok := r.takeState(key); ok {
		w, fromState, err = delta.ReopenWriter(ctx, st, &ts, opts)
	} else {
		w, err = delta.OpenWriter(ctx, st, opts)
	}
	r.mu.Lock()
	if fromState {
		r.stateOpens++
	} else {
		r.logOpens++
	}
	r.mu.Unlock()
	return w, err
}

// checkSchema refuses a table whose columns are not the ones oml writes (a
// table someone else created at our path): writing positional rows into it
// would put values in the wrong columns.
func checkSchema(key tables.TableKey, snap *delta.Snapshot) error {
	want := key.Kind.Schema().Fields
	got := snap.Schema().Fields
	if len(got) != len(want) {
		return &SchemaError{fmt.Sprintf("Delta table %s has %d columns where oml writes %d; it was not created by oml lake drain: move it away", key, len(got), len(want))}
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Type.TypeString() != want[i].Type.TypeString() {
			return &SchemaError{fmt.Sprintf("Delta table %s has column %d %s %s where oml writes %s %s; it was not created by oml lake drain: move it away",
				key, i, got[i].Name, got[i].Type.TypeString(), want[i].Name, want[i].Type.TypeString())}
		}
	}
	return nil
}

// forget drops a writer whose in-memory state can no longer be trusted; the
// next use reopens the table from its log.
func (r *registry) forget(key tables.TableKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.absent.remove(key)
	r.dropStateLocked(key)
	if e, ok := r.writers[key]; ok {
		r.lru.Remove(e)
		delete(r.writers, key)
		r.open -= e.Value.(*openTable).bytes
	}
}

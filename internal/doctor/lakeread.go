package doctor

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakesummary"
	"github.com/omlhq/oml/internal/lakewriter"
)

// lakeRead is the run's one read of every tenant table's log, shared by
// the outbox, continuity, fork and Delta checks. A table whose log is
// unchanged since an earlier run read it in full is served by the lake
// summary (internal/lakesummary: one listing of its log instead of the
// read), less the rolling scrub that reads some of them in full anyway. Each of them used to open
// every table itself (the positions twice, bronze a fourth time for its
// head): 74 s at 10,000 tables. It is read once, store.Concurrency tables
// at a time, and each table's snapshot is dropped as soon as what the
// checks need of it is kept, so memory does not hold every table's file
// list at once.
//
// It is read before any of its checks reads the database, as each of them
// did before: the fork check must read bronze before the journal (a lake
// writer draining meanwhile can then never make bronze look ahead of the
// journal it was copied from), and the continuity check reads the
// positions before the database's outbox sequence.
type lakeRead struct {
	// err is listing the tenants failing (tenant.IDs): every check built
	// on the read reports it its own way.
	err    error
	tables []readTable // dbTableKeys order: tenants by id, then tables.Kinds
	// heads are bronze's newest events by tenant, for the tables read.
	heads map[uuid.UUID]bronzeHead
	// summary says how many tables the lake summary served; its
	// WriteError is saved's.
	summary lakesummary.Stats
	// saved waits for the refreshed summary to be stored (in the
	// background: the checks need only the tables) and says why it could
	// not be ("" when it was, or there was nothing to store).
	saved func() string
}

// readTable is what the checks need of one table.
type readTable struct {
	health tableHealth
	pos    lakewriter.TablePosition
	posErr error // what LakePositions fails with for this table
}

// bronzeHead is one bronze table's head as bronze.ReadHead returns it;
// reread marks a table whose log could not be read: the fork check then
// reads it itself, so its problem reads exactly as before.
type bronzeHead struct {
	head   bronze.Head
	ok     bool
	err    error
	reread bool
}

// readLake returns the run's lake read, reading it on first use.
func (r *run) readLake(ctx context.Context) *lakeRead {
	r.lakeReadOnce.Do(func() {
		// Not the first caller's context: its timeout would fail the
		// others. It lives until the summary is stored.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		read := r.readTables(lctx)
		saved := read.saved
		read.saved = sync.OnceValue(func() string {
			defer cancel()
			return saved()
		})
		r.lakeRead = read
		r.pendingMu.Lock()
		r.pending = append(r.pending, read.saved)
		r.pendingMu.Unlock()
	})
	return r.lakeRead
}

// preloadSummary starts reading the lake summary (16 MB at 28,000 tables)
// while the database check runs: the lake read needs the tenants from the
// database before it can use it, and reading it after them was a fifth of
// the read's time.
func (r *run) preloadSummary(ctx context.Context) {
	r.summaryLoad = make(chan *lakesummary.Loaded, 1) // buffered: a run that never reads the lake leaves it
	go func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		defer cancel()
		r.summaryLoad <- lakesummary.Load(lctx, r.lake)
	}()
}

// waitPending waits for the writes the run left in the background (the
// lake summary's), so a run has stored what it read before it returns.
func (r *run) waitPending() {
	r.pendingMu.Lock()
	pending := r.pending
	r.pendingMu.Unlock()
	for _, wait := range pending {
		wait()
	}
}

func (r *run) readTables(ctx context.Context) *lakeRead {
	keys, err := dbTableKeys(ctx, r)
	if err != nil {
		return &lakeRead{err: err, saved: func() string { return "" }}
	}
	var loaded *lakesummary.Loaded
	if r.summaryLoad != nil {
		select {
		case loaded = <-r.summaryLoad:
		case <-ctx.Done():
			return &lakeRead{err: ctx.Err(), saved: func() string { return "" }}
		}
	}
	read, stats, saved := lakesummary.ReadDeferred(ctx, r.lake, keys, lakesummary.Options{
		SmallFileSize: r.th.SmallFileSize, Vacuum: true, Now: r.now, Write: !r.readOnly, Off: r.opts.NoSummary,
		Loaded: loaded,
	})
	out := &lakeRead{tables: make([]readTable, len(keys)), heads: map[uuid.UUID]bronzeHead{}, summary: stats, saved: saved}
	for i := range read {
		t := &read[i]
		out.tables[i] = readTable{health: r.healthOf(t), pos: t.Position, posErr: t.Err}
		if h := t.Bronze; t.Key.Kind == tables.Bronze && h != nil {
			out.heads[t.Key.Tenant] = bronzeHead{head: h.Head, ok: h.OK, err: h.Err, reread: h.Reread}
		}
	}
	return out
}

// positions are the lake's positions as lakewriter.LakePositions reads
// them: the first table's error, else every table holding a lake-writer
// commit.
func (l *lakeRead) positions() ([]lakewriter.TablePosition, error) {
	if l.err != nil {
		return nil, l.err
	}
	var pos []lakewriter.TablePosition
	for _, t := range l.tables {
		if t.posErr != nil {
			return nil, t.posErr
		}
		if t.pos.TxnVersion > 0 {
			pos = append(pos, t.pos)
		}
	}
	return pos, nil
}

// headReader serves the fork check's bronze heads from the read; a tenant
// it did not read (one only in oml.chain_heads), or whose log it could not
// read, is read by bronze.ReadHead as the fork check would. Nil when the
// read failed: the fork check then reads every head itself.
func (l *lakeRead) headReader(lake store.Store) chainverify.HeadReader {
	if l.err != nil {
		return nil
	}
	return func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error) {
		if h, ok := l.heads[tenant]; ok && !h.reread {
			return h.head, h.ok, h.err
		}
		return bronze.ReadHead(ctx, lake, tenant)
	}
}

// lazyHeadReader is headReader of the run's lake read, taken on the fork
// check's first bronze head rather than before it starts: the fork check
// lists and verifies the witnesses first, and those need nothing of the
// lake read, so they run beside it instead of after it (at 28,000 tables
// the read and the witnesses were each about half of the fork check's
// time). Bronze is still read, from the lake read, before the journal.
func (r *run) lazyHeadReader() chainverify.HeadReader {
	return func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error) {
		if read := r.readLake(ctx).headReader(r.lake); read != nil {
			return read(ctx, tenant)
		}
		return bronze.ReadHead(ctx, r.lake, tenant) // the read failed: as the fork check reads every head itself
	}
}

// positions is lakewriter.LakePositions on the run's read.
func (r *run) positions(ctx context.Context) ([]lakewriter.TablePosition, error) {
	return r.readLake(ctx).positions()
}

// continuity is lakewriter.CheckContinuity of the run's positions, once
// per run: the continuity check reports it and the outbox check's prune
// bounds depend on it (each compared them itself: one statement per
// 5,000 tables, twice).
func (r *run) continuity(ctx context.Context) ([]lakewriter.TablePosition, lakewriter.Continuity, error) {
	r.continuityOnce.Do(func() {
		// Not the first caller's context: its timeout would fail the other.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		defer cancel()
		r.pos, r.contErr = r.positions(cctx)
		if r.contErr == nil {
			r.cont, r.contErr = lakewriter.CheckContinuity(cctx, r.pool, r.lake, r.pos)
		}
	})
	return r.pos, r.cont, r.contErr
}

package lakewriter

import (
	"context"
	"runtime"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/tables"
)

// BeforeBatch runs the per-batch continuity check for (from, to] (the
// continuity benchmark measures it).
func (d *Drainer) BeforeBatch(ctx context.Context, from, to int64) error {
	rec, err := d.beforeBatch(ctx, from, to)
	if err == nil {
		d.batchApplied(rec)
	}
	return err
}

// OpenTables reports the table writers the drainer keeps open and how many
// it closed to stay within Options.MaxOpenTables.
func (d *Drainer) OpenTables() (open int, evictions int64) { return d.tables.stats() }

// TableOpens reports how many tables the drainer opened from their logs
// and rebuilt from their compact states (registry.go).
func (d *Drainer) TableOpens() (fromLog, fromState int64) {
	c := d.tables.counts()
	return c.LogOpens, c.StateOpens
}

// MergeStates reports the compact states of MERGE tables (silver,
// gold/workareas) the drainer keeps and their estimated bytes.
func (d *Drainer) MergeStates() (n int, bytes int64) {
	c := d.tables.counts()
	return c.FullStates, c.FullStateBytes
}

// NoCompactStates makes the drainer reopen every evicted table from its
// log (tests and benchmarks compare the two).
func (d *Drainer) NoCompactStates() { d.tables.noStates = true }

// OnPrefetch sets a hook called when a batch read ahead has been read
// (prefetch.go), on the reading goroutine.
func (d *Drainer) OnPrefetch(fn func(from, to int64, err error)) { d.onPrefetch = fn }

// OnWitnessCapture is called by every witness publication with how many
// tenants were due and how many heads it read.
func (d *Drainer) OnWitnessCapture(fn func(due, heads int)) { d.onWitnessCapture = fn }

// Every batch of this package's tests longer than 32 seqs is read in
// parts (batchread.go), so the exactly-once, crash and failover suites run
// the split read; its own tests are in batchread_test.go.
func init() { batchReadRangeSpan = 16 }

// ReadVerdict is one outbox row as a batch read returned it: its table
// and, for a poison row, why.
type ReadVerdict struct {
	Seq    int64
	Table  string
	Poison string
}

func verdicts(items []*item) []ReadVerdict {
	out := make([]ReadVerdict, 0, len(items))
	for _, it := range items {
		v := ReadVerdict{Seq: it.seq, Table: it.table.String()}
		if it.poison != nil {
			v.Poison = it.poison.Error()
		}
		out = append(out, v)
	}
	return out
}

// ReadWhole reads (from, to] for every table in one read on q.
func ReadWhole(ctx context.Context, q pgx.Tx, from, to int64) ([]ReadVerdict, error) {
	items, err := loadBatch(ctx, q, newRowChecker(), from, to, nil)
	return verdicts(items), err
}

// ReadSplit reads (from, to] in parts ranges of equal width with helpers
// readers besides tx, which import tx's snapshot. blockHelpers makes every
// helper wait for a connection it never gets.
func ReadSplit(ctx context.Context, pool *pgxpool.Pool, tx pgx.Tx, from, to int64, parts, helpers int, blockHelpers bool) ([]ReadVerdict, error) {
	open, err := exportSnapshot(ctx, tx, pool)
	if err != nil {
		return nil, err
	}
	if blockHelpers {
		open = func(ctx context.Context) (querier, func(), error) { <-ctx.Done(); return nil, nil, ctx.Err() }
	}
	items, err := loadRanges(ctx, tx, helpers, open, newRowChecker(), splitRange(from, to, parts, 1))
	return verdicts(items), err
}

// ReadInExportedSnapshot reads (from, to] on one reader that imports tx's
// snapshot, as a helper of a split read does.
func ReadInExportedSnapshot(ctx context.Context, pool *pgxpool.Pool, tx pgx.Tx, from, to int64) ([]ReadVerdict, error) {
	open, err := exportSnapshot(ctx, tx, pool)
	if err != nil {
		return nil, err
	}
	q, closeReader, err := open(ctx)
	if err != nil {
		return nil, err
	}
	defer closeReader()
	items, err := loadBatch(ctx, q, newRowChecker(), from, to, nil)
	return verdicts(items), err
}

// SplitRanges is splitRange, as (from, to] pairs.
func SplitRanges(from, to int64, n int, span int64) [][2]int64 {
	var out [][2]int64
	for _, r := range splitRange(from, to, n, span) {
		out = append(out, [2]int64{r.from, r.to})
	}
	return out
}

// OnForkRecheck sets a hook the long-running loop's fork check beside the
// batches calls once it has read, before the loop takes its result
// (forkrecheck.go), on the check's goroutine.
func (d *Drainer) OnForkRecheck(fn func()) { d.onForkRecheck = fn }

// CheckOnlyLeft counts the rows of a checked read of (from, to] that still
// hold what only the row check needed (the cited event, a decoded payload
// other than a gold.workareas row's), and the gold.workareas rows without
// their event's time.
func CheckOnlyLeft(ctx context.Context, q pgx.Tx, from, to int64) (held, workareasWithoutTime, rows int, err error) {
	items, err := loadBatch(ctx, q, newRowChecker(), from, to, nil)
	for _, it := range items {
		if it.ev != nil || it.bronze != nil || it.mat != nil || it.ret != nil || (it.lin != nil && it.table.Kind != tables.Workareas) {
			held++
		}
		if it.table.Kind == tables.Workareas && it.poison == nil && it.recordedAt.IsZero() {
			workareasWithoutTime++
		}
	}
	return held, workareasWithoutTime, len(items), err
}

// ApplyOneTableAtATime reads (from, to] and applies it one table at a
// time (as applyRange does, without the frontier), reporting at each
// table's commit how many rows of the tables committed before it are
// still reachable after a GC.
func (d *Drainer) ApplyOneTableAtATime(ctx context.Context, from, to int64) (stillHeld []int, tablesApplied int, err error) {
	items, err := d.readRange(ctx, from, to, nil)
	if err != nil {
		return nil, 0, err
	}
	order, parts := group(items)
	items = nil
	watch := make([][]weak.Pointer[item], len(order))
	at := map[tables.TableKey]int{}
	for i, p := range parts {
		at[order[i]] = i
		for _, it := range p {
			watch[i] = append(watch[i], weak.Make(it))
		}
	}
	crash, parallel := d.opts.Crash, d.opts.Parallel
	defer func() { d.opts.Crash, d.opts.Parallel = crash, parallel }()
	d.opts.Parallel = 1
	d.opts.Crash = func(p CrashPoint, key tables.TableKey) error {
		if p != AfterTableCommit {
			return nil
		}
		runtime.GC()
		n := 0
		for _, w := range watch[:at[key]] {
			for _, p := range w {
				if p.Value() != nil {
					n++
				}
			}
		}
		stillHeld = append(stillHeld, n)
		return nil
	}
	_, err = d.applyAll(ctx, order, parts, from, to, false)
	return stillHeld, len(order), err
}

// ForkCheckReads is how many periodic fork checks have read, and their
// reads' time in all.
func (d *Drainer) ForkCheckReads() (int64, time.Duration) {
	return d.forkReads.Load(), time.Duration(d.forkReadNanos.Load())
}

// RecheckForksNow runs the long-running loop's periodic fork check (its
// read beside the batches, then its result) and waits for it.
func (d *Drainer) RecheckForksNow(ctx context.Context) error {
	d.startRecheck(ctx)
	r := d.recheck
	<-r.done
	d.recheck = nil
	return d.applyRecheck(ctx, r)
}

// MergeRowsHits is the hits and misses of d's cache of MERGE-written rows
// so far (the lag benchmark reports its hit ratio).
func MergeRowsHits(d *Drainer) (hits, misses int64) {
	c := d.mergeRows.counts()
	return c.Hits, c.Misses
}

// MergeRowsByKind is, by table kind, what d's cache of MERGE-written
// rows holds now (files and estimated bytes) and its hits and misses so
// far (the lag benchmark reports both).
func MergeRowsByKind(d *Drainer) (kept, hits map[tables.Kind][2]int64) {
	kept, hits = map[tables.Kind][2]int64{}, map[tables.Kind][2]int64{}
	c := d.mergeRows
	if c == nil {
		return kept, hits
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*mergeEntry)
		k := kept[e.key.table.Kind]
		k[0]++
		k[1] += e.bytes
		kept[e.key.table.Kind] = k
	}
	for _, k := range tables.Kinds {
		if i := kindCounter(k); c.hits[i]+c.misses[i] > 0 {
			hits[k] = [2]int64{c.hits[i], c.misses[i]}
		}
	}
	return kept, hits
}

// BatchLoader reads and checks (from, to] as the drain's batch read does
// (loadBatch, in one read), with one row checker for every call (its
// tenants verified once, as in a long-running writer). It returns the rows
// read and how many of them are poison.
func BatchLoader(q *pgxpool.Pool) func(ctx context.Context, from, to int64) (rows, poison int, err error) {
	chk := newRowChecker()
	return func(ctx context.Context, from, to int64) (int, int, error) {
		items, err := loadBatch(ctx, q, chk, from, to, nil)
		poison := 0
		for _, it := range items {
			if it.poison != nil {
				poison++
			}
		}
		return len(items), poison, err
	}
}

// SetFastJSON switches the row check's fast JSON path (flatjson.go) on or
// off, for a benchmark to compare; it returns the previous setting.
func SetFastJSON(on bool) (was bool) { was, fastJSON = fastJSON, on; return was }

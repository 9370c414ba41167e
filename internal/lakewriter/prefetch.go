package lakewriter

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// Pipelining: while a batch's tables commit (applyAll), the next batch is
// cut and its rows are read and checked (loadBatch) in the background, so
// the database read of batch N+1 overlaps the lake writes of batch N. At
// most one batch is read ahead (bounded by the batch limits like any
// batch), by one goroutine that ends with the drain.
//
// The fence: a batch read ahead was read before the continuity check
// (beforeBatch) that precedes its commit. Its rows are committed only if
// they provably come from the history that check then validates: the read
// records, in its own REPEATABLE READ transaction (one snapshot, one
// connection), what the per-batch check compares — the system identifier
// and timeline, the outbox sequence, the batch's anchor (its greatest row)
// and the row at the previous batch's anchor — and at commit time these
// must be what the check just read, with the check finding nothing moved
// (no full check needed). A promotion or a restore between the read and
// the commit changes the timeline (or the anchors), and the rows read
// ahead are dropped and read again; a batch whose bounds came from that
// read is cut again (nothing of it was written yet). A read ahead is also
// dropped when the state it was read under changed (pipeEpoch: a dead
// letter, a hold, a failed attempt of the current batch) or its bounds are
// not the batch's. Held tenants and tables are left out at commit time,
// as for a batch read then.

// errRecut: the history moved under a batch whose bounds came from a read
// ahead; nothing of it was written, and the caller cuts it again.
var errRecut = errors.New("the database moved under a batch read ahead; cut it again")

// prefetch is one batch read ahead. The fields below done are written by
// the reading goroutine before done is closed.
type prefetch struct {
	from, limit int64
	prev        *tables.Anchor // what the previous batch's anchor will be
	epoch       uint64
	done        chan struct{}
	cancel      context.CancelFunc
	usedForCut  bool // the loop took the batch's bounds from this read

	cutOK    bool
	to       int64
	rows     int
	id       Identity
	anchor   *tables.Anchor // the batch's anchor in the read's snapshot
	prevNow  *tables.Anchor // the row at prev.Seq in the read's snapshot
	items    []*item
	err      error
	hasItems bool
}

// pipeline holds the drain's read ahead. Its methods are called by the
// drain's goroutine only.
type pipeline struct {
	ctx    context.Context
	cancel context.CancelFunc
	limit  int64 // the stable prefix the next cut may reach (0: none)
	cur    *prefetch
}

// startPipeline turns read-ahead on until the returned stop is called
// (which cancels a read in flight and waits for it).
func (d *Drainer) startPipeline(ctx context.Context) (stop func()) {
	pctx, cancel := context.WithCancel(ctx)
	d.pipe = &pipeline{ctx: pctx, cancel: cancel}
	return func() {
		p := d.pipe
		d.pipe = nil
		p.discard()
		p.cancel()
	}
}

// discard drops the read ahead, waiting for its goroutine to end.
func (p *pipeline) discard() {
	if f := p.cur; f != nil {
		p.cur = nil
		f.cancel()
		<-f.done
	}
}

// cut is outbox.Cut for the batch after the frontier, taken from the read
// ahead when it cut the same batch: its cut is the same for any stable
// prefix at or past the one it was cut in when it was full (stopped by a
// limit), and for the same stable prefix otherwise.
func (d *Drainer) cut(ctx context.Context, stable int64) (int64, int, error) {
	from := d.frontier.Load()
	if p := d.pipe; p != nil {
		p.limit = stable
		if f := p.cur; f != nil && f.from == from && f.limit <= stable {
			select {
			case <-f.done:
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
			if f.cutOK && (f.to < f.limit || f.limit == stable) {
				f.usedForCut = true
				return f.to, f.rows, nil
			}
		}
	}
	return outbox.Cut(ctx, d.db, from, stable, d.opts.Limits)
}

// readAhead starts reading the batch after to (the batch being applied,
// whose anchor is anchor) unless nothing is known to follow it.
func (d *Drainer) readAhead(to int64, anchor *tables.Anchor) {
	p := d.pipe
	if p == nil || p.limit <= to {
		return
	}
	p.discard() // at most one batch read ahead
	if anchor == nil {
		d.contMu.Lock()
		anchor = d.lastAnchor
		d.contMu.Unlock()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	f := &prefetch{from: to, limit: p.limit, prev: anchor, epoch: d.pipeEpoch.Load(), done: make(chan struct{}), cancel: cancel}
	p.cur = f
	go func() {
		defer close(f.done)
		f.err = d.readBatchAhead(ctx, f)
		if d.onPrefetch != nil {
			d.onPrefetch(f.from, f.to, f.err)
		}
	}()
}

func (d *Drainer) readBatchAhead(ctx context.Context, f *prefetch) error {
	end, n, err := outbox.Cut(ctx, d.db, f.from, f.limit, d.opts.Limits)
	if err != nil {
		return err
	}
	f.to, f.rows, f.cutOK = end, n, true
	if end <= f.from {
		return nil
	}
	tx, err := d.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The history first: this statement takes the snapshot the rows are
	// read in.
	rec, id, now, err := readBatchRecord(ctx, tx, f.from, end, f.prev)
	if err != nil {
		return err
	}
	f.id, f.anchor, f.prevNow = id, rec.Anchor, now
	helpers := batchReaders(d.db.Stat().MaxConns()) - 1
	ranges := batchRanges(f.from, end, helpers)
	var open helperReader
	if helpers > 0 && len(ranges) > 1 {
		// The other readers read in this snapshot (batchread.go).
		if open, err = exportSnapshot(ctx, tx, d.db); err != nil {
			return err
		}
	}
	items, err := loadRanges(ctx, tx, helpers, open, d.chk, ranges)
	if err != nil {
		return err
	}
	f.items, f.hasItems = items, true
	return nil
}

// takeAhead returns the rows read ahead for batch (from, to] if they may
// be committed (the fence above), nil if the batch must be read now; recut
// when the history moved under a batch whose bounds came from the read
// ahead. rec, id and moved are what the per-batch check just found.
func (d *Drainer) takeAhead(ctx context.Context, from, to int64, rec tables.BatchBounds, id Identity, moved bool) (items []*item, recut bool) {
	p := d.pipe
	if p == nil || p.cur == nil {
		return nil, false
	}
	f := p.cur
	if f.from != from {
		p.discard()
		return nil, false
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		p.discard()
		return nil, false
	}
	p.cur = nil
	f.cancel()
	if moved {
		d.log.Info("dropping the batch read ahead: the database moved since it was read", "start", from, "end", to)
		return nil, f.usedForCut
	}
	if f.err != nil || !f.hasItems || f.to != to || f.epoch != d.pipeEpoch.Load() {
		return nil, false
	}
	d.contMu.Lock()
	prev := d.lastAnchor
	d.contMu.Unlock()
	if !sameHistory(f, rec, id, prev) {
		d.log.Info("dropping the batch read ahead: the database's history differs from the one it was read in", "start", from, "end", to)
		return nil, false
	}
	return f.items, false
}

// sameHistory: the read ahead saw what the check before the batch saw.
func sameHistory(f *prefetch, rec tables.BatchBounds, id Identity, prev *tables.Anchor) bool {
	if f.id.SystemIdentifier != id.SystemIdentifier || f.id.Timeline != id.Timeline || f.id.LastSeq < f.to {
		return false
	}
	if !sameAnchor(f.anchor, rec.Anchor) || !sameAnchor(f.prev, prev) {
		return false
	}
	return prev == nil || sameAnchor(f.prevNow, prev)
}

func sameAnchor(a, b *tables.Anchor) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Seq == b.Seq && a.Digest == b.Digest
}

// stateChanged drops what was read ahead under the old state (a dead
// letter, a hold, a failed attempt): it is read again.
func (d *Drainer) stateChanged() { d.pipeEpoch.Add(1) }

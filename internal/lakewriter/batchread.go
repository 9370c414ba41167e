package lakewriter

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/tables"
)

// Reading a batch in parts: a batch's read (loadBatch: the outbox rows, then
// the row check's queries and its decoding and hashing) alternates between
// waiting for PostgreSQL and using one core, and on a backlog it is the
// drain's critical path (it runs one batch ahead of the table commits,
// prefetch.go). So the batch (from, to] is split into contiguous seq
// ranges, and a few readers, each on its own connection, take the ranges
// in turn; their items are put back in seq order.
//
// Every check of the row check is a check of one row against the
// database (its tenant, its event, the submissions it cites, the earlier
// copies and prune marks in oml.outbox), never against the other rows of
// its batch, so reading (from, to] in ranges gives each row the verdict the
// whole read gives it. A batch read in one snapshot (a read ahead: one
// REPEATABLE READ transaction, whose snapshot the continuity fence
// compares) stays in that snapshot: the other readers import it
// (pg_export_snapshot, SET TRANSACTION SNAPSHOT), so every range is read
// in exactly the database state the batch's record was read in.
//
// A helper reader is an optimisation and never needed: the first reader
// (the caller's querier) takes ranges until none is left, and a helper that
// gets no connection before then, or cannot import the snapshot, reads
// nothing. So a small pool (or a busy one) can never block the read.

// batchReadRangeSpan is the fewest outbox seqs a range of a split read
// covers: below that the extra queries cost more than the overlap saves.
// (A variable so that the package's tests make their small batches split
// reads too, export_test.go.)
var batchReadRangeSpan int64 = 1500

// batchReaders is how many readers a split read uses at most: one per core
// (a reader is CPU-bound between its queries), within the pool's size less
// the connections the drain's other work holds (the loop's checks, the
// lease, the witness), and at least one.
func batchReaders(maxConns int32) int {
	n := min(runtime.GOMAXPROCS(0), 4, int(maxConns)-2)
	return max(n, 1)
}

// seqRange is the half-open outbox range (from, to].
type seqRange struct{ from, to int64 }

// splitRange cuts (from, to] into at most n contiguous ranges of at least
// span seqs each (one range when it is shorter than two spans).
func splitRange(from, to int64, n int, span int64) []seqRange {
	width := to - from
	if n < 1 {
		n = 1
	}
	if parts := width / span; parts < int64(n) {
		n = int(max(parts, 1))
	}
	out := make([]seqRange, 0, n)
	lo := from
	for i := 1; i <= n; i++ {
		hi := from + width*int64(i)/int64(n)
		if i == n {
			hi = to
		}
		out = append(out, seqRange{lo, hi})
		lo = hi
	}
	return out
}

// helperReader opens a reader for a split read, and the function that
// closes it.
type helperReader func(ctx context.Context) (querier, func(), error)

// batchRanges are the ranges a split read of (from, to] with helpers
// helper readers takes: at least batchReadRangeSpan seqs each, two per
// reader (so a reader that starts late or a range that is slow does not
// leave the others idle); one range when the batch is too small to split.
func batchRanges(from, to int64, helpers int) []seqRange {
	return splitRange(from, to, 2*(helpers+1), batchReadRangeSpan)
}

// loadRanges is loadBatch of the batch the contiguous ranges tile, for
// every table, read by first and up to helpers readers from open.
func loadRanges(ctx context.Context, first querier, helpers int, open helperReader, chk *rowChecker, ranges []seqRange) ([]*item, error) {
	if len(ranges) == 1 || helpers == 0 || open == nil {
		return loadBatch(ctx, first, chk, ranges[0].from, ranges[len(ranges)-1].to, nil)
	}
	parts := make([][]*item, len(ranges))
	var next atomic.Int64
	read := func(ctx context.Context, q querier) error {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(ranges)) {
				return nil
			}
			r := ranges[i]
			items, err := loadBatch(ctx, q, chk, r.from, r.to, nil)
			if err != nil {
				return err
			}
			parts[i] = items
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	// Helpers still waiting for a connection when the first reader has
	// taken the last range give up; one already reading finishes its range.
	opening, stopOpening := context.WithCancel(gctx)
	defer stopOpening()
	for range min(helpers, len(ranges)-1) {
		g.Go(func() error {
			q, closeReader, err := open(opening)
			if err != nil {
				return nil // the first reader reads what this one would have
			}
			defer closeReader()
			return read(gctx, q)
		})
	}
	g.Go(func() error {
		defer stopOpening()
		return read(gctx, first)
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	items := make([]*item, 0, n)
	for _, p := range parts {
		items = append(items, p...)
	}
	return items, nil
}

// snapshotID is the form of pg_export_snapshot's result, checked before
// it is written into SET TRANSACTION SNAPSHOT (which takes no parameter).
var snapshotID = regexp.MustCompile(`^[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+$`)

// exportSnapshot returns a helperReader whose readers import tx's snapshot:
// READ ONLY REPEATABLE READ transactions on connections of db that see
// exactly what tx sees. tx must stay open while they read.
func exportSnapshot(ctx context.Context, tx pgx.Tx, db txBeginner) (helperReader, error) {
	var id string
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&id); err != nil {
		return nil, fmt.Errorf("export the batch read's snapshot: %w", err)
	}
	if !snapshotID.MatchString(id) {
		return nil, fmt.Errorf("export the batch read's snapshot: unexpected snapshot id %q", id)
	}
	return func(ctx context.Context) (querier, func(), error) {
		htx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return nil, nil, err
		}
		closeTx := func() { _ = htx.Rollback(context.WithoutCancel(ctx)) }
		if _, err := htx.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+id+`'`); err != nil {
			closeTx()
			return nil, nil, err
		}
		return htx, closeTx, nil
	}, nil
}

// readRange reads (from, to] for applyRange when nothing was read ahead:
// a catch-up's one table as loadBatch does, a batch split over the pool's
// connections (each query in a snapshot of its own, as a read on the pool
// always was; the continuity check before the batch is what fences it).
func (d *Drainer) readRange(ctx context.Context, from, to int64, scope *tables.TableKey) ([]*item, error) {
	if scope != nil {
		return loadBatch(ctx, d.db, d.chk, from, to, scope)
	}
	pool := func(context.Context) (querier, func(), error) { return d.db, func() {}, nil }
	helpers := batchReaders(d.db.Stat().MaxConns()) - 1
	return loadRanges(ctx, d.db, helpers, pool, d.chk, batchRanges(from, to, helpers))
}

package lakewriter

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// Rebuilding a table after `oml outbox prune` (internal/outboxprune).
//
// A table the lake does not hold (deleted, or lost with its store) is
// rebuilt from seq 0: the catch-up at start, or the gap rows of the first
// batch that touches it, read every row of the table in (0, frontier].
// Prune deletes rows every table has applied, so some of those rows may be
// gone; they are re-derived from the journal with journal.DeriveOutbox —
// the fold that emitted them, so the same rows — and applied first, in
// journal order. That is exact because the rows prune deletes from one
// table are always a seq prefix of the table's rows, dead-lettered rows
// aside, which are never applied anyway (outbox.Prune): every pruned row
// comes before every row still there.
//
// What a re-derived row cannot carry is its outbox seq (drawn at insert,
// not a function of the chain): its lake row's outbox_seq is NULL. Nothing
// compares outbox_seq with the journal (reconcile compares hashes,
// digests, attribution and state).
//
// A table that exists but is behind the prune mark (restored from an old
// copy, rewound below it) cannot be caught up this way; loadRebuild is only
// for a table with nothing in it. loadBatch refuses such a table
// (belowPruneMark, through.go) and the drain holds it until `oml lake
// repair` catches it up.

// backfilled: the gold tables, whose rows a journal older than gold never
// wrote to the outbox. For them the rows the chain implies that the outbox
// lacks, pruned or never written, are always re-derived (a table's
// unwritten rows are the changes before its first outbox row, so they
// precede its rows in the outbox just as pruned rows do): a rebuild or a
// repair of a gold table then backfills the history before gold
// (docs/gold.md, "Backfilling gold"). Bronze and silver rows were written
// by every oml version, so theirs are derived only after a prune.
func backfilled(k tables.Kind) bool { return k == tables.Gold || k == tables.Workareas }

type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// loadRebuild is loadBatch for (0, to] of one table: in one REPEATABLE
// READ, READ ONLY snapshot (so a prune running meanwhile deletes nothing
// between the reads: every implied row is either pruned before the
// snapshot or read from the outbox), the table's pruned rows re-derived
// from the journal, then its rows still in the outbox.
func loadRebuild(ctx context.Context, db txBeginner, chk *rowChecker, to int64, key tables.TableKey) ([]*item, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: begin: %w", key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	through, err := PruneMark(ctx, tx, key)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", key, err)
	}
	var derived []*item
	if through > 0 || backfilled(key.Kind) {
		if derived, err = prunedItems(ctx, tx, key); err != nil {
			return nil, err
		}
	}
	items := derived
	if err := outbox.ReadBatch(ctx, tx, 0, to, outboxScope(&key), collectItems(&items)); err != nil {
		return nil, fmt.Errorf("read outbox rows (0, %d]: %w", to, err)
	}
	if err := chk.check(ctx, tx, items); err != nil {
		return nil, err
	}
	for _, it := range derived {
		if it.poison != nil {
			// A row the journal implies and the row check refuses: the
			// chain itself is wrong (chain verify's business). Never
			// dead-letter a row that has no outbox seq.
			return nil, fmt.Errorf("rebuild %s: the row journal seq %d implies (its outbox row was pruned) cannot be applied: %v; run oml chain verify",
				key, it.journalSeq, it.poison)
		}
	}
	return items, tx.Commit(ctx)
}

// prunedItems re-derives the table's rows that are no longer in the outbox:
// the rows the tenant's chain implies for the table (journal.DeriveOutbox),
// less those the outbox still holds (matched by event, op and claim;
// re-enqueued copies are not derived and not matched).
func prunedItems(ctx context.Context, tx pgx.Tx, key tables.TableKey) ([]*item, error) {
	evs, err := journal.ReadChain(ctx, tx, key.Tenant)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", key, err)
	}
	implied, err := journal.DeriveOutbox(key.Tenant, evs)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: the chain does not replay, so its pruned rows cannot be re-derived (run oml chain verify): %w", key, err)
	}
	have := map[outbox.KeptRow]int{}
	// Not a copy of a pruned row either (checkPruned refuses those): the
	// pruned original is what the journal implies, and is derived.
	kept, err := outbox.RowsKept(ctx, tx, key.Tenant, string(key.Kind))
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: read the rows still in the outbox: %w", key, err)
	}
	for _, r := range kept {
		have[r]++
	}
	var gone []outbox.Implied
	for _, r := range implied {
		if r.Target != string(key.Kind) {
			continue
		}
		k := outbox.KeptRow{JournalSeq: r.JournalSeq, Op: r.Op}
		if r.ArtifactID != nil {
			k.ArtifactID = *r.ArtifactID
		}
		if r.Version != nil {
			k.Version = int32(*r.Version)
		}
		if have[k] > 0 {
			have[k]--
			continue
		}
		gone = append(gone, outbox.Implied{JournalSeq: r.JournalSeq, Op: r.Op, ArtifactID: k.ArtifactID, Version: k.Version, Payload: string(r.Payload)})
	}
	if len(gone) == 0 {
		return nil, nil
	}
	var items []*item
	if err := outbox.ReadImplied(ctx, tx, key.Tenant, string(key.Kind), gone, collectItems(&items)); err != nil {
		return nil, fmt.Errorf("rebuild %s: read the journal events of the pruned rows: %w", key, err)
	}
	for _, it := range items {
		it.derived = true
		if it.row != nil {
			it.row[outboxSeqColumn(key.Kind)] = nil
		}
	}
	return items, nil
}

// outboxSeqColumn is the position of outbox_seq in a table's rows.
func outboxSeqColumn(k tables.Kind) int {
	switch k {
	case tables.Bronze:
		return int(tables.BronzeOutboxSeq)
	case tables.Silver:
		return int(tables.SilverOutboxSeq)
	}
	return int(tables.LineageOutboxSeq)
}

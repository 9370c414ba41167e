package lakewriter

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// "The rows of table T up to seq S, pruned or not": the one home for every
// reader of a table's old rows outside a batch (`oml lake repair` putting
// rows back, rebuilding a table that is gone). After `oml outbox prune`
// some of those rows are no longer in the outbox; they are re-derived from
// the journal (prunedItems, journal.DeriveOutbox) in the same REPEATABLE
// READ snapshot as the rows still there, exactly as the drain's rebuild of
// a table from seq 0 does (loadRebuild).
//
// Why "up to S" is only answerable for S at or above the table's prune
// mark: a re-derived row has no outbox seq (it is drawn at insert, not a
// function of the chain), so among the pruned rows nothing says which were
// at or below S. The pruned rows of one table are a seq prefix of its
// rows (rederive.go), so for S ≥ the mark they are all in; for S below
// it the question has no answer, and ThroughPruneMarkError says so
// instead of guessing — except S = 0 (nothing; a table at txn version 0 is
// rebuilt by the drain's catch-up from 0, which re-derives every pruned
// row).

// ThroughPruneMarkError: the rows of a table up to a seq below its prune
// mark were asked for; some of them were pruned, and which is not known.
type ThroughPruneMarkError struct {
	Key       tables.TableKey
	Through   int64 // the seq asked for (a table's txn version)
	PruneMark int64 // oml.outbox_pruned.through_seq of the table
}

func (e *ThroughPruneMarkError) Error() string {
	return fmt.Sprintf("%s is at txn version %d, below its outbox prune mark %d: rows in (%d, %d] were pruned from the outbox and can only be re-derived for the whole table; run oml lake repair --tenant %s --table %s (it rebuilds the table from the journal)",
		e.Key, e.Through, e.PruneMark, e.Through, e.PruneMark, e.Key.Tenant, e.Key.Kind)
}

// RowKeys selects the keys of a table whose rows TableRowsThrough builds:
// journal seqs for bronze (and gold.lineage, whose rows are appends of one
// event each), claims for silver, workareas for gold.workareas. A nil *RowKeys selects every row.
type RowKeys struct {
	JournalSeqs []int64
	Claims      []ClaimRef
	// Workareas selects gold.workareas rows (one per workarea).
	Workareas []string
}

// ClaimRef is a silver row's key.
type ClaimRef struct {
	ArtifactID string
	Version    int32
}

// keyIndex is a selection as sets.
type keyIndex struct {
	all    bool
	seqs   map[int64]bool
	claims map[ClaimRef]bool
	areas  map[string]bool
}

func (k *RowKeys) index() keyIndex {
	if k == nil {
		return keyIndex{all: true}
	}
	ix := keyIndex{seqs: make(map[int64]bool, len(k.JournalSeqs)), claims: make(map[ClaimRef]bool, len(k.Claims))}
	for _, s := range k.JournalSeqs {
		ix.seqs[s] = true
	}
	for _, c := range k.Claims {
		ix.claims[c] = true
	}
	ix.areas = make(map[string]bool, len(k.Workareas))
	for _, a := range k.Workareas {
		ix.areas[a] = true
	}
	return ix
}

func (ix keyIndex) has(it *item) bool {
	if ix.all {
		return true
	}
	switch it.table.Kind {
	case tables.Silver:
		return ix.claims[ClaimRef{it.artifact, it.version}]
	case tables.Workareas:
		return it.lin == nil || ix.areas[it.lin.WorkareaID] // an undecodable row is returned (as its error)
	}
	return ix.seqs[it.journalSeq]
}

// PruneMark reads how far `oml outbox prune` pruned key's table's rows
// (oml.outbox_pruned.through_seq; 0 when never).
func PruneMark(ctx context.Context, q querier, key tables.TableKey) (int64, error) {
	through, err := outbox.PruneMark(ctx, q, outboxTable(key))
	if err != nil {
		return 0, fmt.Errorf("read the outbox prune mark of %s: %w", key, err)
	}
	return through, nil
}

// outboxTable is key's table as the outbox names it.
func outboxTable(key tables.TableKey) outbox.Table {
	return outbox.Table{Tenant: key.Tenant, Target: string(key.Kind)}
}

// PruneMarks reads every table's prune mark (PruneMark for all tables at
// once: the catch-up at start and lake repair need them for every table).
func PruneMarks(ctx context.Context, q querier) (map[tables.TableKey]int64, error) {
	marks, err := outbox.PruneMarks(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(map[tables.TableKey]int64, len(marks))
	for t, through := range marks {
		out[tables.TableKey{Tenant: t.Tenant, Kind: tables.Kind(t.Target)}] = through
	}
	return out, nil
}

// belowPruneMark is the drain's fence for a table caught up from its txn
// version (gap rows, catch-up): rows of the table in (from, mark] were
// pruned, and the outbox read would skip them without a trace, then the
// commit would set the txn version past them. The table is held instead
// (a fault of its own) until `oml lake repair` catches it up.
func belowPruneMark(ctx context.Context, q querier, key tables.TableKey, from int64) error {
	mark, err := PruneMark(ctx, q, key)
	if err != nil {
		return err
	}
	if mark > from {
		return &ThroughPruneMarkError{Key: key, Through: from, PruneMark: mark}
	}
	return nil
}

// loadThrough reads, in one REPEATABLE READ, READ ONLY snapshot, every
// row of key's table with seq ≤ through that sel selects: the pruned ones
// re-derived from the journal (first, in journal order), then those still
// in the outbox (in seq order), each through the row check. Dead-lettered
// rows are left out, as the drain leaves them out.
func loadThrough(ctx context.Context, db txBeginner, chk *rowChecker, key tables.TableKey, through int64, sel *RowKeys) ([]*item, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("read the rows of %s: begin: %w", key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	mark, err := PruneMark(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	if through <= 0 {
		// A table at txn version 0 holds nothing; the drain's catch-up
		// from 0 rebuilds it, pruned rows re-derived (loadRebuild).
		return nil, tx.Commit(ctx)
	}
	if mark > through {
		return nil, &ThroughPruneMarkError{Key: key, Through: through, PruneMark: mark}
	}
	ix := sel.index()
	var items []*item
	if mark > 0 || backfilled(key.Kind) {
		derived, err := prunedItems(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		for _, it := range derived {
			if ix.has(it) {
				items = append(items, it)
			}
		}
	}
	scope := &outbox.Scope{Tenant: key.Tenant, Target: string(key.Kind)}
	if sel != nil {
		if key.Kind != tables.Workareas {
			// A workarea is in the payload, not a column: for
			// gold.workareas every row of the table is read and
			// TableRowsThrough selects.
			scope.Only = &outbox.Keys{ByClaim: key.Kind == tables.Silver, JournalSeqs: sel.JournalSeqs}
			for _, c := range sel.Claims {
				scope.Only.ArtifactIDs, scope.Only.Versions = append(scope.Only.ArtifactIDs, c.ArtifactID), append(scope.Only.Versions, c.Version)
			}
		}
	}
	if err := outbox.ReadBatch(ctx, tx, 0, through, scope, collectItems(&items)); err != nil {
		return nil, fmt.Errorf("read the outbox rows of %s up to %d: %w", key, through, err)
	}
	if err := chk.check(ctx, tx, items); err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.poison != nil && it.derived {
			return nil, fmt.Errorf("%s: the row journal seq %d implies (its outbox row was pruned) cannot be built: %v; run oml chain verify",
				key, it.journalSeq, it.poison)
		}
	}
	return items, tx.Commit(ctx)
}

// TableRowsThrough builds the rows key's table must hold at txn version
// through for the keys sel selects (nil: every row), pruned or not, with
// the drain's own query, decoding and row check (check.go): one row per
// bronze or gold append; for silver one row per claim, its materialize
// folded with the retracts that follow it, as the drain's MERGE does.
// Dead-lettered rows are left out. A row that cannot be built is returned
// as its *PoisonError; through below the table's prune mark is a
// *ThroughPruneMarkError.
//
// Memory: the tenant's chain when the table was pruned (the re-derivation
// replays it), plus the rows returned.
func TableRowsThrough(ctx context.Context, db *pgxpool.Pool, key tables.TableKey, through int64, sel *RowKeys) ([]TableRow, error) {
	items, err := loadThrough(ctx, db, newRowChecker(), key, through, sel)
	if err != nil {
		return nil, err
	}
	if key.Kind == tables.Workareas {
		return workareaRows(key, items, sel.index())
	}
	var rows []TableRow
	inserts := map[claimKey]int{}
	for _, it := range items {
		if it.poison != nil {
			return nil, it.poison
		}
		if key.Kind != tables.Silver {
			rows = append(rows, TableRow{JournalSeq: it.journalSeq, Row: it.row})
			continue
		}
		k := claimKey{it.artifact, it.version}
		if it.retract == nil {
			r := TableRow{JournalSeq: it.journalSeq, Claim: ClaimRef{it.artifact, it.version}, Row: append(pq.Row(nil), it.row...)}
			if i, dup := inserts[k]; dup {
				rows[i] = r
				continue
			}
			inserts[k] = len(rows)
			rows = append(rows, r)
			continue
		}
		if i, ok := inserts[k]; ok {
			setRetract(rows[i].Row, it)
		}
	}
	if key.Kind == tables.Silver {
		sort.SliceStable(rows, func(i, j int) bool {
			a, b := rows[i].Claim, rows[j].Claim
			if a.ArtifactID != b.ArtifactID {
				return a.ArtifactID < b.ArtifactID
			}
			return a.Version < b.Version
		})
	}
	return rows, nil
}

// TableRow is one row TableRowsThrough built, with its key: the journal
// seq of the event it is of (for silver, of the materialize) and, for
// silver, the claim.
type TableRow struct {
	JournalSeq int64
	Claim      ClaimRef
	Workarea   string // gold.workareas: the row's workarea
	Row        pq.Row
}

// workareaRows adds up the selected workareas' changes into their rows
// (tables.GoldWorkareaRow.Apply, as the drain's MERGE does), sorted by
// workarea. JournalSeq is the row's last change.
func workareaRows(key tables.TableKey, items []*item, ix keyIndex) ([]TableRow, error) {
	byArea := map[string]*tables.GoldWorkareaRow{}
	for _, it := range items {
		if !ix.has(it) {
			continue
		}
		if it.poison != nil {
			return nil, it.poison
		}
		r := byArea[it.lin.WorkareaID]
		if r == nil {
			r = &tables.GoldWorkareaRow{TenantID: key.Tenant.String(), WorkareaID: it.lin.WorkareaID}
			byArea[it.lin.WorkareaID] = r
		}
		r.Apply(workareaChange(it))
	}
	rows := make([]TableRow, 0, len(byArea))
	for wa, r := range byArea {
		rows = append(rows, TableRow{JournalSeq: r.LastJournalSeq, Workarea: wa, Row: r.Row()})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Workarea < rows[j].Workarea })
	return rows, nil
}

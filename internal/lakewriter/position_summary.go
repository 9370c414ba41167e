package lakewriter

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/tenant"
)

// A table's position kept outside its log, for the lake summary
// (internal/lakesummary): doctor and lake status keep what they read of
// each table, with a fingerprint of its log, so a table whose log has not
// changed is not read again. These two functions are the only thing the
// summary needs of this package, with the hook lake status reads the
// tables through (StatusOptions.ReadTables); nothing in the write path
// uses them.

// Record is the record of the commit that set p's txn version, when the
// reader of the position had it: known is false when CheckContinuity must
// read the log for it; found is false when that commit holds no record
// (written before oml recorded batches).
func (p TablePosition) Record() (rec tables.BatchBounds, found, known bool) {
	if p.rec == nil {
		return tables.BatchBounds{}, false, false
	}
	return p.rec.rec, p.rec.ok, true
}

// ResolveRecord returns p with the record CheckContinuity needs, read
// from the table's log as CheckContinuity reads it (the last commits) when
// p does not carry it: the lake summary keeps it, since the commit that
// set a txn version never changes.
func ResolveRecord(ctx context.Context, lake store.Store, p TablePosition) (TablePosition, error) {
	if p.rec != nil || p.TxnVersion <= 0 {
		return p, nil
	}
	recs, err := newestRecords(ctx, lake, []TablePosition{p})
	if err != nil {
		return p, err
	}
	p.rec = &recs[0]
	return p, nil
}

// KnownPosition is a position read earlier (Record's results), for
// CheckContinuity: with known, it reads no log for the table.
func KnownPosition(key tables.TableKey, txnVersion int64, rec tables.BatchBounds, found, known bool) TablePosition {
	p := TablePosition{Key: key, TxnVersion: txnVersion}
	if known {
		p.rec = &foundRecord{rec: rec, ok: found}
	}
	return p
}

// TableFacts is what ReadStatus needs of one table when its caller reads
// the tables for it (StatusOptions.ReadTables).
type TableFacts struct {
	Exists          bool
	Version         int64
	Files           int
	SinceCheckpoint int64
	Position        TablePosition
	// Err: the table cannot be read (or is not one the lake writer can
	// write), as LakePositions would fail for it.
	Err error
}

// TablesReader reads keys (every tenant's tables, in tenant.IDs order
// then tables.Kinds) and returns one TableFacts each, in keys order.
type TablesReader func(ctx context.Context, keys []tables.TableKey) []TableFacts

// statusKeys are the tables ReadStatus reads: every tenant's, in the order
// readTables and LakePositions read them.
func statusKeys(ctx context.Context, db *pgxpool.Pool, sorted bool) ([]tables.TableKey, error) {
	ids, err := tenant.IDs(ctx, db)
	if err != nil {
		return nil, err
	}
	if sorted {
		tenant.ByID(ids)
	}
	keys := make([]tables.TableKey, 0, len(ids)*len(tables.Kinds))
	for _, id := range ids {
		for _, k := range tables.Kinds {
			keys = append(keys, tables.TableKey{Tenant: id, Kind: k})
		}
	}
	return keys, nil
}

// readTablesVia is readTables through read.
func readTablesVia(ctx context.Context, db *pgxpool.Pool, read TablesReader) ([]TableStatus, []TablePosition, error) {
	keys, err := statusKeys(ctx, db, false)
	if err != nil {
		return nil, nil, err
	}
	facts := read(ctx, keys)
	out := make([]TableStatus, len(keys))
	var positions []TablePosition
	for i, k := range keys {
		f := facts[i]
		ts := TableStatus{Table: k.Path(), Tenant: k.Tenant.String(), Kind: string(k.Kind), TxnVersion: -1, Version: -1}
		switch {
		case f.Err != nil:
			ts.Error = f.Err.Error()
		case f.Exists:
			ts.Exists, ts.Version, ts.Files, ts.SinceCheckpoint = true, f.Version, f.Files, f.SinceCheckpoint
			// Lake-writer txn versions are batch ends, never 0: 0 is none.
			if f.Position.TxnVersion > 0 {
				ts.TxnVersion = f.Position.TxnVersion
				positions = append(positions, f.Position)
			}
		}
		out[i] = ts
	}
	return out, positions, nil
}

// checkLakeVia is CheckLake through read.
func checkLakeVia(ctx context.Context, db *pgxpool.Pool, lake store.Store, read TablesReader) (Continuity, error) {
	keys, err := statusKeys(ctx, db, true)
	if err != nil {
		return Continuity{}, err
	}
	var pos []TablePosition
	for _, f := range read(ctx, keys) {
		if f.Err != nil {
			return Continuity{}, f.Err
		}
		if f.Position.TxnVersion > 0 {
			pos = append(pos, f.Position)
		}
	}
	return CheckContinuity(ctx, db, lake, pos)
}

package lakewriter

import (
	"context"
	"errors"
	"fmt"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// TableRead is one tenant table's log read once, for read-only checks that
// share the read (`oml doctor` reads every table once per run and hands it
// to its continuity, outbox, fork and Delta checks, instead of each of them
// opening every table again: 74 s at 10,000 tables before).
type TableRead struct {
	Key   tables.TableKey
	Store store.Store // the table's root (nil when the key has none)
	// Snap is the table's full snapshot (its live files and tombstones
	// too); nil when the table does not exist or its log cannot be read.
	Snap *delta.Snapshot
	// LoadErr is delta.Load's error when the log cannot be read (nil for
	// a table that does not exist).
	LoadErr error
	// Err is what LakePositions fails with for this table: the log cannot
	// be read, or it is not a table the lake writer can write (a protocol
	// it refuses, columns it does not write). Nil for a table that does
	// not exist.
	Err error
}

// Exists reports whether the table has a log (readable or not).
func (t *TableRead) Exists() bool { return t.Snap != nil || t.LoadErr != nil }

// ReadTable reads key's log once: what LakePositions, the table status and
// a reader of the table's files (snapshot health, bronze's head) each need.
// A full snapshot, not a lean one: its readers want the file list.
func ReadTable(ctx context.Context, lake store.Store, key tables.TableKey) TableRead {
	t := TableRead{Key: key}
	st, err := key.Store(lake)
	if err != nil {
		t.LoadErr, t.Err = err, err
		return t
	}
	t.Store = st
	// The registry's open (OpenWriter: the load and the write gate, then
	// the schema check), so Err is the error LakePositions would give.
	w, err := delta.OpenWriter(ctx, st, deltaOptions())
	switch {
	case errors.Is(err, delta.ErrTableNotFound):
		return t
	case err != nil:
		t.Err = fmt.Errorf("open Delta table %s: %w", key, err)
		// Refused by the write gate, or unreadable? Only a refused table
		// is read again (rare: a table another engine upgraded).
		t.Snap, t.LoadErr = delta.Load(ctx, st)
		if errors.Is(t.LoadErr, delta.ErrTableNotFound) {
			t.Snap, t.LoadErr = nil, nil // removed in between
		}
		return t
	}
	t.Snap = w.Snapshot()
	t.Err = checkSchema(key, t.Snap)
	return t
}

// Position is the table's txn version and the record of the commit that
// set it, as LakePositions reads them (TxnVersion 0: none, or no
// snapshot).
func (t *TableRead) Position() TablePosition {
	if t.Snap == nil {
		return TablePosition{Key: t.Key}
	}
	return positionOf(t.Key, t.Snap)
}

// positionOf reads a table's position from its snapshot: the txn version
// and, when the snapshot read the commit that set it, that commit's batch
// record (CheckContinuity then reads no log for it).
func positionOf(key tables.TableKey, snap *delta.Snapshot) TablePosition {
	p := TablePosition{Key: key}
	if v, ok := snap.TxnVersion(tables.AppID); ok {
		p.TxnVersion = v
	}
	if ci, ok := snap.TxnCommitInfo(tables.AppID); ok {
		rec, found := tables.ParseBatchBounds(ci)
		p.rec = &foundRecord{rec: rec, ok: found}
	}
	return p
}

// PositionsOf is LakePositions over tables read already: the first error
// in reads order, else the positions of the tables holding a lake-writer
// commit.
func PositionsOf(reads []TableRead) ([]TablePosition, error) {
	var pos []TablePosition
	for i := range reads {
		if err := reads[i].Err; err != nil {
			return nil, err
		}
		if p := reads[i].Position(); p.TxnVersion > 0 {
			pos = append(pos, p)
		}
	}
	return pos, nil
}

package lakewriter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// registry keeps one open Delta writer per table, so each table's snapshot
// stays in memory between batches and the log is re-read only after a lost
// race.
type registry struct {
	lake store.Store
	opts delta.Options
	// lean opens the append-only tables (bronze, gold) with lean Delta
	// writers: the lake writer only appends to them and needs their txn
	// version, not their file list, so memory does not grow with their
	// file count. Silver keeps its list: MERGE prunes files by stats.
	lean bool

	mu      sync.Mutex
	writers map[tables.TableKey]*delta.Writer
}

func newRegistry(lake store.Store, opts delta.Options, lean bool) *registry {
	return &registry{lake: lake, opts: opts, lean: lean, writers: map[tables.TableKey]*delta.Writer{}}
}

// writer returns the table's writer, opening it (and creating the table
// when create is set and it does not exist yet). With create unset, a
// missing table returns (nil, nil).
func (r *registry) writer(ctx context.Context, key tables.TableKey, create bool) (*delta.Writer, error) {
	r.mu.Lock()
	w, ok := r.writers[key]
	r.mu.Unlock()
	if ok {
		return w, nil
	}
	st, err := key.Store(r.lake)
	if err != nil {
		return nil, err
	}
	opts := r.opts
	opts.Lean = r.lean && key.Kind != tables.Silver
	w, err = delta.OpenWriter(ctx, st, opts)
	if errors.Is(err, delta.ErrTableNotFound) {
		if !create {
			return nil, nil
		}
		w, err = delta.CreateTable(ctx, st, specFor(key), opts)
		if errors.Is(err, delta.ErrConflict) {
			// Another writer created it first: open what it created.
			w, err = delta.OpenWriter(ctx, st, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open Delta table %s: %w", key, err)
	}
	if err := checkSchema(key, w.Snapshot()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if existing, ok := r.writers[key]; ok {
		return existing, nil
	}
	r.writers[key] = w
	return w, nil
}

// checkSchema refuses a table whose columns are not the ones oml writes (a
// table someone else created at our path): writing positional rows into it
// would put values in the wrong columns.
func checkSchema(key tables.TableKey, snap *delta.Snapshot) error {
	want := schemaFor(key.Kind).Fields
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
	delete(r.writers, key)
	r.mu.Unlock()
}

package lakewriter

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// What `oml lake repair` (internal/lakerepair) needs of the writer to put
// rows back: the rows built exactly as a drain builds them, and a table
// created exactly as a drain creates it.

// TableRows builds the rows key's table must hold for the given outbox
// rows (all of key's table, in seq order), with the drain's own query,
// decoding and row check (check.go): one row per bronze or gold append;
// for silver one row per claim, its materialize folded with the retracts
// that follow it in seqs, as the drain's MERGE does. Dead-lettered rows
// are left out, as the drain leaves them out. A row that cannot be built
// is returned as its *PoisonError.
func TableRows(ctx context.Context, db *pgxpool.Pool, key tables.TableKey, seqs []int64) ([]pq.Row, error) {
	chk := newRowChecker()
	var rows []pq.Row
	inserts := map[claimKey]pq.Row{}
	var order []claimKey
	for _, s := range seqs {
		items, err := loadBatch(ctx, db, chk, s-1, s, &key)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.poison != nil {
				return nil, it.poison
			}
			if key.Kind != tables.Silver {
				rows = append(rows, it.row)
				continue
			}
			k := claimKey{it.artifact, it.version}
			if it.retract == nil {
				if _, dup := inserts[k]; !dup {
					order = append(order, k)
				}
				inserts[k] = append(pq.Row(nil), it.row...)
				continue
			}
			if row, ok := inserts[k]; ok {
				setRetract(row, it)
			}
		}
	}
	for _, k := range order {
		rows = append(rows, inserts[k])
	}
	if key.Kind == tables.Silver {
		sortSilver(rows)
	}
	return rows, nil
}

// CreateTable creates key's table under the lake root as a drain would
// (same schema, name and description), for a repair that rebuilds a table
// that is gone.
func CreateTable(ctx context.Context, lake store.Store, key tables.TableKey) (*delta.Writer, error) {
	st, err := store.Sub(lake, key.Path())
	if err != nil {
		return nil, err
	}
	w, err := delta.CreateTable(ctx, st, specFor(key), deltaOptions())
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	return w, nil
}

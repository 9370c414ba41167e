package lakewriter

import (
	"context"
	"fmt"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// What `oml lake repair` (internal/lakerepair) needs of the writer to put
// rows back: the rows built exactly as a drain builds them
// (TableRowsThrough, through.go), and a table created exactly as a drain
// creates it.

// CreateTable creates key's table under the lake root as a drain would
// (same schema, name and description), for a repair that rebuilds a table
// that is gone.
func CreateTable(ctx context.Context, lake store.Store, key tables.TableKey) (*delta.Writer, error) {
	st, err := store.Sub(lake, key.Path())
	if err != nil {
		return nil, err
	}
	w, err := delta.CreateTable(ctx, st, key.Spec(), deltaOptions())
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	return w, nil
}

package lakewriter

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/tables"
)

// RawRows are one table's rows of a batch with their Parquet schema.
type RawRows struct {
	Schema *pq.Schema
	Rows   []pq.Row
}

// RawBatch reads (from, to] with the lake writer's own query and decoding
// and returns each table's insert rows keyed by table path, without any
// Delta logic. It exists for the benchmark that measures the drain against
// its physical limit (the same reads, the same Parquet bytes).
func RawBatch(ctx context.Context, db *pgxpool.Pool, from, to int64) (map[string]RawRows, error) {
	items, err := loadBatch(ctx, db, newRowChecker(), from, to, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]RawRows{}
	for _, it := range items {
		if it.row == nil {
			continue
		}
		key := it.table.Path()
		rr, ok := out[key]
		if !ok {
			sch, err := pqSchema(it.table.Kind)
			if err != nil {
				return nil, err
			}
			rr.Schema = sch
		}
		rr.Rows = append(rr.Rows, it.row)
		out[key] = rr
	}
	return out, nil
}

func pqSchema(k tables.Kind) (*pq.Schema, error) {
	var fields []pq.Field
	for _, f := range schemaFor(k).Fields {
		t, err := delta.PQType(f.Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, pq.Field{Name: f.Name, Type: t, Nullable: true})
	}
	return pq.NewSchema(fields...), nil
}

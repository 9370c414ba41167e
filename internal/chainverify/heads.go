package chainverify

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StoredHead is a tenant's row of oml.chain_heads with the last verified
// checkpoint beside it (nil when the chain was never checkpointed).
type StoredHead struct {
	Tenant        uuid.UUID
	Name          string // oml.tenants.name; "" when the tenant has no row
	Seq           int64
	Hash          []byte
	UpdatedAt     time.Time
	CheckpointSeq *int64
	CheckpointAt  *time.Time
}

// StoredHeads reads oml.chain_heads joined with oml.chain_checkpoints
// (only: one tenant; nil: all), in tenant id order. Name is not read.
func StoredHeads(ctx context.Context, q Querier, only *uuid.UUID) ([]StoredHead, error) {
	return readHeads(ctx, q, func(h *StoredHead) []any {
		return []any{&h.Tenant, &h.Seq, &h.Hash, &h.UpdatedAt, &h.CheckpointSeq, &h.CheckpointAt}
	}, `
SELECT h.tenant_id, h.seq, h.hash, h.updated_at, c.seq, c.verified_at
FROM oml.chain_heads h LEFT JOIN oml.chain_checkpoints c USING (tenant_id)
WHERE $1::uuid IS NULL OR h.tenant_id = $1
ORDER BY h.tenant_id`, only)
}

// StoredHeadsByName reads every row of oml.chain_heads with its tenant's
// name, ordered by name then id (the order `oml status` lists chains in).
// The checkpoint is not read.
func StoredHeadsByName(ctx context.Context, q Querier) ([]StoredHead, error) {
	return readHeads(ctx, q, func(h *StoredHead) []any {
		return []any{&h.Tenant, &h.Name, &h.Seq, &h.Hash, &h.UpdatedAt}
	}, `
SELECT h.tenant_id, coalesce(t.name, ''), h.seq, h.hash, h.updated_at
  FROM oml.chain_heads h LEFT JOIN oml.tenants t ON t.id = h.tenant_id
 ORDER BY t.name, h.tenant_id`)
}

// readHeads runs a query of chain heads, scanning each row into the
// fields dest names.
func readHeads(ctx context.Context, q Querier, dest func(*StoredHead) []any, sql string, args ...any) ([]StoredHead, error) {
	rs, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read oml.chain_heads: %w", err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (StoredHead, error) {
		var h StoredHead
		err := r.Scan(dest(&h)...)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read oml.chain_heads: %w", err)
	}
	return out, nil
}

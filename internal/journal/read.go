package journal

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RowQuerier runs a single-row query (a pool, a connection or a
// transaction).
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EventHash reads the hash of tenant's journal event at seq. A missing
// event is pgx.ErrNoRows; errors come back unwrapped, for the caller to
// name the event its way.
func EventHash(ctx context.Context, q RowQuerier, tenant uuid.UUID, seq int64) ([]byte, error) {
	var h []byte
	err := q.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, tenant, seq).Scan(&h)
	return h, err
}

// ProviderGenesis reads the provider chain's first event (`key.issued` of
// the root key, made by `oml init`): its hash and key id. Before init it is
// pgx.ErrNoRows; errors come back unwrapped.
func ProviderGenesis(ctx context.Context, q RowQuerier) (hash []byte, keyID string, err error) {
	err = q.QueryRow(ctx, `SELECT hash, key_id FROM oml.journal WHERE tenant_id = $1 AND seq = 1`, ProviderTenant).Scan(&hash, &keyID)
	return hash, keyID, err
}

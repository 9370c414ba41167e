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

// EventHashes reads the hash of each tenant's journal event at the seq at
// names, in one query (EventHash for many tenants at once: one round trip
// instead of one per tenant). A tenant whose event is missing is absent
// from the result; errors come back unwrapped.
func EventHashes(ctx context.Context, q Querier, at map[uuid.UUID]int64) (map[uuid.UUID][]byte, error) {
	out := make(map[uuid.UUID][]byte, len(at))
	if len(at) == 0 {
		return out, nil
	}
	tenants, seqs := make([]uuid.UUID, 0, len(at)), make([]int64, 0, len(at))
	for t, s := range at {
		tenants, seqs = append(tenants, t), append(seqs, s)
	}
	rows, err := q.Query(ctx, `
SELECT j.tenant_id, j.hash FROM unnest($1::uuid[], $2::bigint[]) AS w(tenant_id, seq)
JOIN oml.journal j ON j.tenant_id = w.tenant_id AND j.seq = w.seq`, tenants, seqs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var t uuid.UUID
		var h []byte
		if err := rows.Scan(&t, &h); err != nil {
			return nil, err
		}
		out[t] = h
	}
	return out, rows.Err()
}

// ProviderGenesis reads the provider chain's first event (`key.issued` of
// the root key, made by `oml init`): its hash and key id. Before init it is
// pgx.ErrNoRows; errors come back unwrapped.
func ProviderGenesis(ctx context.Context, q RowQuerier) (hash []byte, keyID string, err error) {
	err = q.QueryRow(ctx, `SELECT hash, key_id FROM oml.journal WHERE tenant_id = $1 AND seq = 1`, ProviderTenant).Scan(&hash, &keyID)
	return hash, keyID, err
}

package witness

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Identity names the PostgreSQL cluster and timeline a head was read from,
// so a witness shows when a failover (a new timeline, or another cluster)
// happened between two heads.
func Identity(ctx context.Context, q Querier) (systemID, timeline string, err error) {
	// pg_control_checkpoint works on a primary and on a standby alike.
	err = q.QueryRow(ctx, `
SELECT (SELECT system_identifier::text FROM pg_control_system()),
       (SELECT lpad(upper(to_hex(timeline_id)), 8, '0') FROM pg_control_checkpoint())`).Scan(&systemID, &timeline)
	if err != nil {
		return "", "", fmt.Errorf("read the database's system identifier and timeline: %w", err)
	}
	return systemID, timeline, nil
}

// Capture reads the stored chain heads (one tenant's, or all) as unsigned
// witness heads stamped with now and the database's identity.
func Capture(ctx context.Context, q Querier, tenant *uuid.UUID, now time.Time) ([]*Head, error) {
	return capture(ctx, q, now, `
SELECT tenant_id, seq, hash FROM oml.chain_heads
WHERE $1::uuid IS NULL OR tenant_id = $1 ORDER BY tenant_id`, tenant)
}

// CaptureTenants is Capture for the listed tenants only (those with a
// stored head; none when the list is empty): what a publication holds
// follows the tenants it publishes, not every tenant of the deployment.
func CaptureTenants(ctx context.Context, q Querier, tenants []uuid.UUID, now time.Time) ([]*Head, error) {
	if len(tenants) == 0 {
		return nil, nil
	}
	ids := make([]string, len(tenants))
	for i, t := range tenants {
		ids[i] = t.String()
	}
	return capture(ctx, q, now, `
SELECT tenant_id, seq, hash FROM oml.chain_heads
WHERE tenant_id = ANY($1::uuid[]) ORDER BY tenant_id`, ids)
}

func capture(ctx context.Context, q Querier, now time.Time, query string, arg any) ([]*Head, error) {
	sys, tl, err := Identity(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, query, arg)
	if err != nil {
		return nil, fmt.Errorf("read oml.chain_heads: %w", err)
	}
	defer rows.Close()
	var out []*Head
	for rows.Next() {
		var h Head
		var hash []byte
		if err := rows.Scan(&h.Tenant, &h.Seq, &hash); err != nil {
			return nil, fmt.Errorf("read oml.chain_heads: %w", err)
		}
		h.Hash = hex.EncodeToString(hash)
		h.Time = now
		h.SystemIdentifier, h.Timeline = sys, tl
		out = append(out, &h)
	}
	return out, rows.Err()
}

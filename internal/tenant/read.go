package tenant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The reads of oml.tenants that other packages use. The table has one
// owner, and tenants are listed by one query in one order: by name, the
// order operators read lists in (and a collation only the database
// knows). A caller that needs id order sorts with ByID, which is
// PostgreSQL's uuid order (bytewise), so no second ORDER BY is needed.

// Ref is a tenant's id and name, all that oml.tenants lists for callers
// that do not need the chain head (List and Resolve read that too).
type Ref struct {
	ID   uuid.UUID
	Name string
}

// Refs lists every tenant, the provider included (its row's name is
// ProviderName), ordered by name.
func Refs(ctx context.Context, q Querier) ([]Ref, error) {
	rows, err := q.Query(ctx, `SELECT id, name FROM oml.tenants ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Ref, error) {
		var t Ref
		err := r.Scan(&t.ID, &t.Name)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return out, nil
}

// IDs lists every tenant id, the provider included (its chain has a
// bronze table), ordered by name.
func IDs(ctx context.Context, q Querier) ([]uuid.UUID, error) {
	refs, err := Refs(ctx, q)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return ids, nil
}

// KnownIDs lists every tenant id the database knows of, in id order: the
// provider, the tenants of oml.tenants, and the tenants with a chain head
// (oml.chain_heads), which can exist without a tenants row (a chain
// restored or forged ahead of it). The one home of that union: the fork
// check compares every such chain with bronze, and a restore replays
// every such chain. A failed read comes back unwrapped, for the caller to
// say what it was listing for.
func KnownIDs(ctx context.Context, q Querier) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx, `SELECT $1::uuid UNION SELECT id FROM oml.tenants UNION SELECT tenant_id FROM oml.chain_heads ORDER BY 1`, Provider)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// ByID sorts ids in place in id order (bytewise, as PostgreSQL orders
// uuids) and returns them.
func ByID(ids []uuid.UUID) []uuid.UUID {
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// Names maps every tenant id to its name, the provider included.
func Names(ctx context.Context, q Querier) (map[uuid.UUID]string, error) {
	refs, err := Refs(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]string, len(refs))
	for _, r := range refs {
		out[r.ID] = r.Name
	}
	return out, nil
}

// IDByName is the id of the tenant named name; ErrUnknown when none is.
// Unlike Resolve it reads oml.tenants alone (no chain head).
func IDByName(ctx context.Context, q Querier, name string) (uuid.UUID, error) {
	var id uuid.UUID
	err := q.QueryRow(ctx, `SELECT id FROM oml.tenants WHERE name = $1`, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.UUID{}, fmt.Errorf("%w %q", ErrUnknown, name)
	}
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("look up tenant %q: %w", name, err)
	}
	return id, nil
}

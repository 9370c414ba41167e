package tenant

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
)

// Provider is the reserved provider tenant id.
var Provider = journal.ProviderTenant

// ProviderName is the provider tenant's name, the one spelling every
// command shows and accepts for it.
const ProviderName = journal.ProviderTenantName

var nameRE = journal.TenantNameRE

var (
	// ErrNotInitialized: no provider chain yet.
	ErrNotInitialized = errors.New("the deployment is not initialised")
	// ErrOtherKey: the deployment was initialised with another key.
	ErrOtherKey = errors.New("the deployment was initialised with a different key")
	// ErrUnknown: no such tenant.
	ErrUnknown = errors.New("unknown tenant")
	// ErrBadName: the name does not follow the naming rule.
	ErrBadName = errors.New("bad tenant name")
)

// ValidateName checks a tenant name against the naming rule.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", ErrBadName, name)
	}
	if IsProviderName(name) {
		return fmt.Errorf("%w %q: the name is reserved for the provider tenant (shown as %s); choose another name", ErrBadName, name, ProviderName)
	}
	return nil
}

// ProviderAlias is the other way an operator may write the provider
// tenant ("--tenant provider"); it is reserved so that it can never name
// a customer tenant too.
const ProviderAlias = "provider"

// IsProviderName reports whether s names the provider tenant: its name
// (_provider) or the reserved alias (provider).
func IsProviderName(s string) bool { return s == ProviderName || s == ProviderAlias }

// Tenant is one tenant with its chain head.
type Tenant struct {
	ID           uuid.UUID `json:"id"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at"`
	ProviderSeq  int64     `json:"provider_seq"`
	ProviderHash string    `json:"provider_hash"`
	HeadSeq      int64     `json:"head_seq"`
}

// InitResult reports what Init did.
type InitResult struct {
	KeyID       string    `json:"key_id"`
	Created     bool      `json:"created"` // false: already initialised with this key
	ProviderSeq int64     `json:"provider_seq"`
	IssuedAt    time.Time `json:"issued_at"`
}

// Init performs deployment genesis on a migrated database: the provider
// chain's root key.issued for k. Re-running with the same key changes
// nothing (Created=false); a different key is ErrOtherKey.
func Init(ctx context.Context, pool *pgxpool.Pool, k *keys.Key) (InitResult, error) {
	return chain.InTx(ctx, pool, func(tx pgx.Tx) (InitResult, error) {
		// Take the provider lock before looking, so two concurrent inits
		// cannot both see an empty provider chain.
		if err := chain.Lock(ctx, tx, Provider); err != nil {
			return InitResult{}, err
		}
		var rootID string
		var seq int64
		var at time.Time
		err := tx.QueryRow(ctx, `SELECT key_id, issued_seq, issued_at FROM oml.signing_keys ORDER BY issued_seq LIMIT 1`).Scan(&rootID, &seq, &at)
		switch {
		case err == nil && rootID == k.KeyID():
			return InitResult{KeyID: rootID, ProviderSeq: seq, IssuedAt: at}, nil
		case err == nil:
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT revoked_at IS NULL FROM oml.signing_keys WHERE key_id = $1`, k.KeyID()).Scan(&ok); err == nil && ok {
				return InitResult{KeyID: k.KeyID()}, nil // a later issued key: already a key of this deployment
			}
			return InitResult{}, fmt.Errorf("%w (%s), not with this key (%s): use the deployment's key file, or a fresh database for a new deployment", ErrOtherKey, rootID, k.KeyID())
		case !errors.Is(err, pgx.ErrNoRows):
			return InitResult{}, err
		}
		ev, err := journal.New(journal.KeyIssued{
			KeyID: k.KeyID(), Algorithm: "ed25519",
			PublicKey: base64.StdEncoding.EncodeToString(k.Public()), Role: "root",
		})
		if err != nil {
			return InitResult{}, err
		}
		recs, err := chain.AppendTx(ctx, tx, k, Provider, ev)
		if err != nil {
			return InitResult{}, err
		}
		return InitResult{KeyID: k.KeyID(), Created: true, ProviderSeq: int64(recs[0].Seq), IssuedAt: recs[0].RecordedAt}, nil
	})
}

// Create creates tenant name: the provider chain's tenant.created and the
// tenant's tenant.genesis, in one transaction. If the name exists, it
// returns the existing tenant and created=false.
func Create(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, name string) (t Tenant, created bool, err error) {
	if err := ValidateName(name); err != nil {
		return Tenant{}, false, err
	}
	if t, err := Resolve(ctx, pool, name); err == nil {
		return t, false, nil
	} else if !errors.Is(err, ErrUnknown) {
		return Tenant{}, false, err
	}
	id := uuid.New()
	_, err = chain.InTx(ctx, pool, func(tx pgx.Tx) (struct{}, error) {
		return struct{}{}, CreateTx(ctx, tx, k, id, name)
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "tenants_name_key" {
		// Lost a race with a concurrent create of the same name.
		t, rerr := Resolve(ctx, pool, name)
		return t, false, rerr
	}
	if err != nil {
		if errors.Is(err, journal.ErrUnknownTenant) || (errors.Is(err, journal.ErrRejected) && !providerChainExists(ctx, pool)) {
			// After `oml migrate` alone there is no provider chain, and the
			// append refuses tenant.created as the chain's first event: what
			// the operator needs to hear is "init".
			return Tenant{}, false, fmt.Errorf("%w: run `oml init` first", ErrNotInitialized)
		}
		return Tenant{}, false, err
	}
	t, err = Resolve(ctx, pool, id.String())
	return t, true, err
}

// CreateTx appends the two events that create tenant id/name inside tx.
func CreateTx(ctx context.Context, tx pgx.Tx, k *keys.Key, id uuid.UUID, name string) error {
	created, err := journal.New(journal.TenantCreated{TenantID: id.String(), Name: name})
	if err != nil {
		return err
	}
	recs, err := chain.AppendTx(ctx, tx, k, Provider, created)
	if err != nil {
		return err
	}
	genesis, err := journal.New(journal.TenantGenesis{
		TenantID: id.String(), Name: name,
		ProviderSeq: recs[0].Seq, ProviderHash: hex.EncodeToString(recs[0].Hash[:]),
	})
	if err != nil {
		return err
	}
	_, err = chain.AppendTx(ctx, tx, k, id, genesis)
	return err
}

// providerChainExists reports whether the provider chain has a head; asked
// only to explain a refused create, so a failing query answers "yes" and
// leaves the refusal as it was.
func providerChainExists(ctx context.Context, q Querier) bool {
	exists := true
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.chain_heads WHERE tenant_id = $1)`, Provider).Scan(&exists); err != nil {
		return true
	}
	return exists
}

// Querier is a pool, connection or transaction.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

const selectTenants = `
SELECT t.id, t.name, t.created_at, t.provider_seq, t.provider_hash, coalesce(h.seq, 0)
  FROM oml.tenants t LEFT JOIN oml.chain_heads h ON h.tenant_id = t.id`

func scan(row pgx.Row) (Tenant, error) {
	var t Tenant
	var ph []byte
	if err := row.Scan(&t.ID, &t.Name, &t.CreatedAt, &t.ProviderSeq, &ph, &t.HeadSeq); err != nil {
		return Tenant{}, err
	}
	t.ProviderHash = hex.EncodeToString(ph)
	return t, nil
}

// List returns every customer tenant (not the provider), by name.
func List(ctx context.Context, q Querier) ([]Tenant, error) {
	rows, err := q.Query(ctx, selectTenants+` WHERE t.id <> $1 ORDER BY t.name`, Provider)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	defer rows.Close()
	var out []Tenant
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Resolve finds a tenant by name or by id.
func Resolve(ctx context.Context, q Querier, nameOrID string) (Tenant, error) {
	where := ` WHERE t.name = $1`
	arg := any(nameOrID)
	if IsProviderName(nameOrID) {
		where, arg = ` WHERE t.id = $1`, Provider
	}
	if id, err := uuid.Parse(nameOrID); err == nil {
		where, arg = ` WHERE t.id = $1`, id
	}
	t, err := scan(q.QueryRow(ctx, selectTenants+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tenant{}, fmt.Errorf("%w %q: no tenant has that name or id; list them with `oml tenant list`", ErrUnknown, nameOrID)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("look up tenant %q: %w", nameOrID, err)
	}
	return t, nil
}

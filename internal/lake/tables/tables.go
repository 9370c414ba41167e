package tables

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
)

// AppID is the Delta txn appId of every lake-writer commit.
const AppID = "oml-lakewriter"

// Kind is one of the four per-tenant tables.
type Kind string

// The tables, named as outbox targets.
const (
	Bronze Kind = journal.TargetBronzeEvents
	Silver Kind = journal.TargetSilverClaims
	Gold   Kind = journal.TargetGoldLineage
	// Workareas is gold/workareas: one row per workarea, MERGEd.
	Workareas Kind = journal.TargetGoldWorkareas
)

// Kinds lists the tables in a fixed order.
var Kinds = []Kind{Bronze, Silver, Gold, Workareas}

// NumKinds is len(Kinds), as a constant: per-tenant records sized by it
// (a bit or a slot per kind) keep one entry per tenant instead of one per
// table.
const NumKinds = 4

// Index is k's position in Kinds; ok is false for any other Kind.
func (k Kind) Index() (i int, ok bool) {
	switch k {
	case Bronze:
		return 0, true
	case Silver:
		return 1, true
	case Gold:
		return 2, true
	case Workareas:
		return 3, true
	}
	return 0, false
}

// Dir is the table's directory under a tenant: bronze/events, ...
func (k Kind) Dir() string {
	switch k {
	case Bronze:
		return "bronze/events"
	case Silver:
		return "silver/claims"
	case Gold:
		return "gold/lineage"
	case Workareas:
		return "gold/workareas"
	}
	return ""
}

// ParseTarget reads an outbox row's target as a Kind; any other target is
// an error (for the lake writer, the row's own fault).
func ParseTarget(target string) (Kind, error) {
	switch Kind(target) {
	case Bronze, Silver, Gold, Workareas:
		return Kind(target), nil
	}
	return "", fmt.Errorf("unknown outbox target %q", target)
}

// TableKey names one Delta table: a tenant's table of a kind.
type TableKey struct {
	Tenant uuid.UUID
	Kind   Kind
}

// Path is the table's location relative to the lake root:
// <tenant_id>/bronze/events and so on.
func (k TableKey) Path() string { return TenantPrefix(k.Tenant) + k.Kind.Dir() }

// TenantPrefix is the prefix of every key of a tenant's tables,
// "<tenant_id>/".
func TenantPrefix(tenant uuid.UUID) string { return tenant.String() + "/" }

func (k TableKey) String() string { return k.Path() }

// Store is the table's store: lake rooted at the table's Path.
func (k TableKey) Store(lake store.Store) (store.Store, error) { return store.Sub(lake, k.Path()) }

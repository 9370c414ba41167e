package chainverify

import (
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chain"
)

// ProviderTenant is the reserved provider tenant whose chain issues keys
// and creates tenants.
var ProviderTenant = chain.ProviderTenant

// Event is one stored journal row, exactly as read from oml.journal. The
// verifier trusts none of it: every field is checked. Byte slices may be
// reused by the source after the verifier returns from handling the event;
// the verifier copies what it keeps.
type Event struct {
	Tenant     uuid.UUID
	Seq        int64
	PrevHash   []byte
	Hash       []byte
	Signature  []byte
	KeyID      string
	EventType  string
	Payload    []byte
	RecordedAt time.Time
}

// Event types the verifier interprets.
const (
	TypeKeyIssued     = "key.issued"
	TypeTenantCreated = "tenant.created"
	TypeTenantGenesis = "tenant.genesis"
	TypeKeyRevoked    = "key.revoked"
)

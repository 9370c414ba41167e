package journal

import (
	"context"

	"github.com/google/uuid"
)

// DeriveOutbox is the one journal → outbox-row derivation. It returns the
// outbox rows tenant's stored chain (evs, every event from seq 1 in order)
// implies, in the order the append path inserted them, with Seq 0: an
// outbox seq is drawn at insert and is not a function of the chain.
// Re-enqueued dead-letter copies are not among them (a copy repeats an
// earlier row; see Replay).
//
// It is the same code as the append path's: both run the fold
// (folder.apply), whose addOutbox calls are the only place outbox rows are
// made from events, so an emitted row and its re-derived twin cannot
// differ (TestDeriveOutbox_EqualsTheEmittedRowsForEveryEventType). Readers
// of outbox rows that `oml outbox prune` may have deleted — the lake
// writer's rebuild of a missing table, `oml lake repair` — re-derive them
// with it instead of reading the outbox.
func DeriveOutbox(tenant uuid.UUID, evs []ReplayEvent) ([]OutboxRow, error) {
	_, rows, err := Replay(tenant, evs)
	return rows, err
}

// ReadChain reads tenant's stored chain in seq order, in the shape
// DeriveOutbox and Replay take. q must see the tenant's journal rows (the
// owner, the lake writer or the auditor; the application only its own
// tenant).
func ReadChain(ctx context.Context, q Querier, tenant uuid.UUID) ([]ReplayEvent, error) {
	return readChain(ctx, q, tenant)
}

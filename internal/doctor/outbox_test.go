package doctor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/outboxprune"
)

// The outbox check: size, and the age of the oldest row every table has
// applied; it warns once that row is older than --outbox-prunable-warn, and
// is OK again after oml outbox prune.
func TestDoctor_Outbox_WarnsWhenAppliedRowsAreNotPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, 10, 0, 3)
	b.drain(t, nil)

	c := requireStatus(t, b.doctor(t, nil), doctor.IDOutbox, doctor.StatusOK)
	require.Positive(t, c.Data["outbox_bytes"])
	require.NotNil(t, c.Data["oldest_prunable_at"])
	require.Contains(t, c.Summary, "the oldest row every table has applied")

	c = requireStatus(t, b.doctor(t, func(th *doctor.Thresholds) { th.OutboxPrunableWarn = time.Nanosecond }), doctor.IDOutbox, doctor.StatusWarn)
	require.Contains(t, c.Details[0], "oml outbox prune")

	_, err := outboxprune.Run(ctx, outboxprune.Options{DB: b.pool, Lake: b.lake, OlderThan: 0})
	require.NoError(t, err)
	c = requireStatus(t, b.doctor(t, func(th *doctor.Thresholds) { th.OutboxPrunableWarn = time.Nanosecond }), doctor.IDOutbox, doctor.StatusOK)
	require.Nil(t, c.Data["oldest_prunable_at"])
	require.Contains(t, c.Summary, "no row every table has applied is left")
}

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

// The outbox check takes the continuity check's comparison (one per run):
// with the database behind the lake (its outbox sequence below the
// tables' txn versions, as after a failover that lost a tail) continuity
// fails and the outbox check warns that nothing can be pruned, as when it
// compared them itself.
func TestDoctor_Outbox_LakeAheadOfTheDatabase_WarnsNothingCanBePruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, 5, 0, 7)
	b.drain(t, nil)
	requireStatus(t, b.doctor(t, nil), doctor.IDOutbox, doctor.StatusOK)

	var last int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT last_value FROM oml.outbox_seq_seq`).Scan(&last))
	_, err := b.pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last-3)
	require.NoError(t, err)
	rep := b.doctor(t, nil)
	c := requireStatus(t, rep, doctor.IDContinuity, doctor.StatusFail)
	require.Equal(t, "lake-ahead", c.Data["state"])
	o := requireStatus(t, rep, doctor.IDOutbox, doctor.StatusWarn)
	require.Contains(t, o.Summary, "nothing can be pruned while the lake does not share the database's history")
	require.Nil(t, o.Data["oldest_prunable_at"])
}

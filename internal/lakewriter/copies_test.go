package lakewriter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// plantCopy inserts a second copy of outbox row seq (same tenant, event,
// target, op, claim and payload: the journal implies it, so the row check
// alone passes it) behind the database's rule, as an owner who dropped
// outbox_implied_once could, and expects it dead-lettered.
func (b *bundle) plantCopy(t *testing.T, seq int64) int64 {
	t.Helper()
	var c int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `
INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload FROM oml.outbox WHERE seq = $1
RETURNING seq`, seq).Scan(&c))
	b.expectDead(c)
	return c
}

// TestCopies_PlantedCopyAcrossACrash_EachRowAppliedOnce: copies of a row
// already in the lake and of rows in the pending batch (a bronze row and a
// materialization, whose original comes earlier in the same batch) are
// poison; the writer crashes after the first table of the batch commits,
// restarts, and the replay dead-letters exactly the copies and leaves every
// journal-implied row in the lake exactly once.
func TestCopies_PlantedCopyAcrossACrash_EachRowAppliedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 8, Seed: 12, PromoteRatio: 1})
	lake := store.NewMem()
	b.drainInto(t, lake)
	var drained int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(seq) FROM oml.outbox WHERE target = 'bronze.events'`).Scan(&drained))

	b.load(t, workload.Config{Claims: 8, Seed: 13, PromoteRatio: 1})
	var bronze, mat int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(seq) FILTER (WHERE target = 'bronze.events'),
		max(seq) FILTER (WHERE op = 'materialize') FROM oml.outbox`).Scan(&bronze, &mat))
	require.Greater(t, mat, drained, "a pending materialization")
	_, err := b.pool.Exec(ctx, `DROP INDEX oml.outbox_implied_once`)
	require.NoError(t, err)
	copies := []int64{b.plantCopy(t, drained), b.plantCopy(t, bronze), b.plantCopy(t, mat)}

	// One batch for the rest, one table at a time, crashing after the first
	// table commits.
	hook, fired := crashAfter(lakewriter.AfterTableCommit, 1)
	o := b.finalBatchOpts(lake)
	o.Crash = hook
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(ctx)
	require.True(t, fired(), "the crash point was reached")
	require.ErrorIs(t, err, lakewriter.ErrCrashed)

	b.drainInto(t, lake)
	b.verifyLake(t, lake) // the dead letters are exactly the copies; every row once
	for _, c := range copies {
		var why string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT error FROM oml.dead_letter WHERE outbox_seq = $1`, c).Scan(&why))
		require.Contains(t, why, "which is not dead-lettered: the journal implies the row once", "copy %d", c)
	}
}

package lakewriter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrain_EvictedTablesChangedByAnotherWriterAndMaintenance_CompactReopensStayExactlyOnce:
// writer A keeps one table open, so every other table it touched is
// closed with its compact state. Between A's passes another writer (no
// lease) drains the next rows into every table, and maintenance compacts
// and checkpoints the tables: each of A's states is then behind its
// table. A's next pass rebuilds its writers from those states, loses the
// put-if-absent race on every table the other writer moved on, catches
// up from the log, and the lake is exactly the journal.
func TestDrain_EvictedTablesChangedByAnotherWriterAndMaintenance_CompactReopensStayExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	lake := store.NewMem()
	oa := b.opts(lake)
	oa.Holder = "writer-a"
	oa.MaxOpenTables = 1
	oa.CheckpointInterval = 3
	a, err := lakewriter.New(oa)
	require.NoError(t, err)

	for round := uint64(0); round < 3; round++ {
		b.load(t, workload.Config{Claims: 12, Seed: 40 + round, RetractRatio: 0.3})
		b.drainAll(t, a)
		b.verifyLake(t, lake)

		b.load(t, workload.Config{Claims: 6, Seed: 50 + round, RetractRatio: 0.3})
		ob := b.opts(lake)
		ob.Holder = "writer-b"
		other, err := lakewriter.New(ob)
		require.NoError(t, err)
		b.drainAll(t, other)
		ts, err := maintain.Tables(lake, b.tenants, []tables.Kind{tables.Bronze, tables.Gold})
		require.NoError(t, err)
		for _, tb := range ts {
			_, err := maintain.Compact(ctx, tb, maintain.CompactOptions{})
			require.NoError(t, err)
			_, err = maintain.CheckpointTable(ctx, tb)
			require.NoError(t, err)
		}
	}
	b.load(t, workload.Config{Claims: 6, Seed: 60, RetractRatio: 0.3})
	b.drainAll(t, a)
	b.verifyLake(t, lake)
	_, fromState := a.TableOpens()
	require.Positive(t, fromState, "tables were rebuilt from their compact states")
}

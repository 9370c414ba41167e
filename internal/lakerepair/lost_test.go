package lakerepair_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testkit"
)

// TestRepair_PromotedStandbyNeverSawATenant_ItsTablesArchivedAndRemoved:
// a tenant is created, written and drained only in the tail the failover
// loses: the promoted database has no such tenant, yet the lake holds its
// tables. They wait while the provider chain's lost tail may still be
// restored; after accept-fork, the repair (besides the rewinds) archives
// every row of that tenant's tables and removes every file (class
// lost-timeline-tenant, action remove), journalled on the provider chain
// with the tenant's id; the lost tenant's events and claims are in the
// archive; the lake equals the new journal; a second run does nothing.
func TestRepair_PromotedStandbyNeverSawATenant_ItsTablesArchivedAndRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	var lost uuid.UUID
	f := newForkedWith(t, lake, func(f *forked) {
		tn, _, err := tenant.Create(ctx, f.pool, f.key, "lost-only")
		require.NoError(t, err)
		lost = tn.ID
		f.load(t, []uuid.UUID{lost}, 9)
		f.drain(t)
	})
	for _, k := range tables.Kinds { // bronze, silver and gold (the workload promotes)
		require.NotEmpty(t, readTable(t, lake, tables.TableKey{Tenant: lost, Kind: k}, []string{"tenant_id"}), "the lost tenant's %s is in the lake", k)
	}
	var known bool
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.tenants WHERE id = $1)`, lost).Scan(&known))
	require.False(t, known, "the promoted database never saw the tenant")

	// Before the provider chain's fork is accepted, its lost tail (the
	// tenant's creation) might still come back: the tables wait.
	dry, err := f.repair(t, lakerepair.Options{DryRun: true})
	require.NoError(t, err)
	waiting := 0
	for _, s := range dry.Plan.NotRepaired {
		if s.Tenant == lost {
			require.Equal(t, string(lakerepair.LostTenant), s.Class)
			require.Contains(t, s.Command, "restore-tail")
			waiting++
		}
	}
	require.Equal(t, len(tables.Kinds), waiting, "%+v", dry.Plan.NotRepaired)
	for _, tp := range dry.Plan.Tables {
		require.NotEqual(t, lost, tp.Tenant)
	}

	runForkedRepair(t, f) // rewinds, removes, archive holds every lost event and claim, journalled once, second run nothing
	for _, k := range tables.Kinds {
		key := tables.TableKey{Tenant: lost, Kind: k}
		require.Empty(t, readTable(t, lake, key, []string{"tenant_id"}), "no live row of the lost tenant's %s", k)
		st, err := key.Store(lake)
		require.NoError(t, err)
		hist, err := delta.History(ctx, st, delta.HistoryOptions{Limit: 1})
		require.NoError(t, err)
		require.Equal(t, lakerepair.Operation, hist[0].Operation, "the log stays, ending with the repair commit")
	}
	onProvider := 0
	for _, ev := range repairEvents(t, f.pool)[uuid.Nil] {
		for _, tb := range ev.Tables {
			if tb.TenantID == lost.String() {
				require.Equal(t, lakerepair.ActionRemove, tb.Action)
				onProvider++
			}
		}
	}
	require.Equal(t, len(tables.Kinds), onProvider, "the removals are journalled on the provider chain")
}

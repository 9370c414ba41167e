package lakerepair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
)

// erasedBodiesInLake reads every live silver file of every tenant (not
// through reconcile) and the repair archive, and returns the rows that
// carry a body of a claim the journal says is erased: with lakeState,
// only those whose row says erased (the rows at the table's txn version;
// a later erasure is still to be applied by the drain).
func erasedBodiesInLake(t *testing.T, e *env, lakeState bool) (live, archived []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range tenantIDs(t, e.pool) {
		erased := map[string]bool{}
		rows, err := e.pool.Query(ctx, `SELECT DISTINCT artifact_id FROM oml.claims WHERE tenant_id = $1 AND state = 'erased'`, id)
		require.NoError(t, err)
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			erased[a] = true
		}
		rows.Close()
		for _, r := range readTable(t, e.lake, tables.TableKey{Tenant: id, Kind: tables.Silver}, []string{"artifact_id", "body", "state"}) {
			if erased[r[0].(string)] && r[1] != nil && (!lakeState || r[2] == "erased") {
				live = append(live, id.String()+"/"+r[0].(string))
			}
		}
		for _, rs := range archivedRows(t, e.lake, tables.Silver, "tenant_id", "artifact_id", "body", "state") {
			for _, r := range rs {
				if r[0] == id.String() && erased[r[1].(string)] && r[2] != nil && (!lakeState || r[3] == "erased") {
					archived = append(archived, id.String()+"/"+r[1].(string))
				}
			}
		}
	}
	return live, archived
}

// TestRepair_RewindPastAMaintainThatErasedBodies_NoErasedBodyComesBack:
// claims are erased and drained (silver's MERGE copies the body with
// state erased); after the lost tail is drained, `oml lake maintain`'s
// erase-bodies nulls those bodies (rewriting the files). The failover
// loses the tail, the application writes on, the fork is accepted, and
// the repair rewinds silver to a version before that maintain: the files
// it re-adds are the ones erase-bodies replaced. No live file nor the
// archive may hold an erased row's body after the rewind; after the
// drain re-applies the new timeline and maintain runs, none anywhere, and
// the lake equals the journal.
func TestRepair_RewindPastAMaintainThatErasedBodies_NoErasedBodyComesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	nulled := 0
	f := newForkedWith(t, lake, func(f *forked) {
		for _, id := range tenantIDs(t, f.pool) {
			key := tables.TableKey{Tenant: id, Kind: tables.Silver}
			st, err := key.Store(f.lake)
			require.NoError(t, err)
			res, err := maintain.EraseBodies(ctx, maintain.Table{Key: key, Store: st}, maintain.EraseOptions{})
			require.NoError(t, err)
			nulled += res.BodiesNulled
		}
		live, _ := erasedBodiesInLake(t, f.env, false)
		require.Empty(t, live, "maintain nulled every erased body")
	})
	require.Positive(t, nulled, "the workload erased drained claims and maintain nulled their bodies")
	require.Positive(t, f.acceptForks(t))

	res, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Remaining, "%+v", res.Plan.NotRepaired)
	rewound := false
	for _, r := range res.Repaired {
		rewound = rewound || r.Action == lakerepair.ActionRewind
	}
	require.True(t, rewound, "the repair rewound: %+v", res.Repaired)
	live, archived := erasedBodiesInLake(t, f.env, true)
	require.Empty(t, live, "no erased body is back in a live file after the rewind")
	require.Empty(t, archived, "no erased body is in the repair archive")

	// The drain re-applies the new timeline: an erasure whose promotion it
	// re-applies too goes through erasure's ordinary window again (the
	// MERGE copies the body; docs/erasure.md step 2) until the next
	// maintain, as the failover runbook says to run.
	f.drain(t)
	_, archived = erasedBodiesInLake(t, f.env, true)
	require.Empty(t, archived)
	for _, id := range tenantIDs(t, f.pool) {
		key := tables.TableKey{Tenant: id, Kind: tables.Silver}
		st, err := key.Store(f.lake)
		require.NoError(t, err)
		_, err = maintain.EraseBodies(ctx, maintain.Table{Key: key, Store: st}, maintain.EraseOptions{})
		require.NoError(t, err)
	}
	live, _ = erasedBodiesInLake(t, f.env, false)
	require.Empty(t, live)
	requireLakeEqualsJournal(t, f.env)
}

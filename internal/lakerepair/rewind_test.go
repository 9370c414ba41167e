package lakerepair_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
)

// forked is a deployment after a failover that lost a tail the lake had
// drained, on which the application then wrote: old is what the lost
// primary's journal and fold held.
type forked struct {
	*env
	oldEvents map[string]string // tenant/seq -> hash
	oldClaims map[string]bool   // tenant/artifact/version of promoted claims
}

func journalOf(t *testing.T, pool *pgxpool.Pool) (map[string]string, map[string]bool) {
	t.Helper()
	ctx := context.Background()
	ev := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT tenant_id, seq, hash FROM oml.journal`)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var s int64
		var h []byte
		require.NoError(t, rows.Scan(&id, &s, &h))
		ev[fmt.Sprintf("%s/%d", id, s)] = hex.EncodeToString(h)
	}
	rows.Close()
	cl := map[string]bool{}
	rows, err = pool.Query(ctx, `SELECT tenant_id, artifact_id, version FROM oml.claims WHERE promoted_seq IS NOT NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var a string
		var v int32
		require.NoError(t, rows.Scan(&id, &a, &v))
		cl[fmt.Sprintf("%s/%s/%d", id, a, v)] = true
	}
	rows.Close()
	return ev, cl
}

// newForked: a real primary and a real streaming standby (pg_basebackup).
// The standby keeps what was written while it streamed; then it is
// stopped, the primary writes and the lake writer drains a tail the
// standby never gets, the primary crashes and the standby is promoted.
// The application then writes new events for every tenant and creates a
// tenant on the promoted database.
func newForked(t *testing.T, lake store.Store) *forked {
	t.Helper()
	return newForkedWith(t, lake, nil)
}

// newForkedWith is newForked with lostTail run after the lost tail was
// drained, before the primary dies (nil: nothing).
func newForkedWith(t *testing.T, lake store.Store, lostTail func(*forked)) *forked {
	t.Helper()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	d := testkit.NewDeploymentAt(t, primary.CreateDatabase(t, "oml", schema.Migrate), 2)
	f := &forked{env: &env{pool: d.Pool, key: d.Key, lake: lake}}
	f.load(t, d.Tenants, 1)
	f.drain(t)
	standby := testdb.StartStandby(t, primary)
	f.load(t, d.Tenants, 2) // streamed: the standby keeps it
	promoted := testdb.LoseTail(t, primary, standby, func() {
		f.load(t, d.Tenants, 3) // the lost tail, drained into the lake
		f.drain(t)
		if lostTail != nil {
			lostTail(f)
		}
		f.oldEvents, f.oldClaims = journalOf(t, f.pool)
		f.pool.Close()
	})
	f.pool = testdb.OpenPool(t, promoted.URL("oml"))
	f.load(t, d.Tenants, 4)
	fresh, _, err := tenant.Create(ctx, f.pool, f.key, "fresh")
	require.NoError(t, err)
	f.load(t, []uuid.UUID{fresh.ID}, 5)
	return f
}

// requireArchiveHoldsLost: every event and every promoted claim of the
// lost timeline is in the archive, and every archived bronze row is either
// lost or back in the live table from the new journal.
func requireArchiveHoldsLost(t *testing.T, f *forked) {
	t.Helper()
	nowEvents, nowClaims := journalOf(t, f.pool)
	archived := map[string]string{}
	for _, rows := range archivedRows(t, f.lake, tables.Bronze, "tenant_id", "seq", "hash") {
		for _, r := range rows {
			archived[fmt.Sprintf("%s/%d", r[0], r[1])] = hex.EncodeToString(r[2].([]byte))
		}
	}
	lost := 0
	for k, h := range f.oldEvents {
		if nowEvents[k] == h {
			continue
		}
		lost++
		require.Equal(t, h, archived[k], "lost event %s is archived with its hash", k)
	}
	require.Positive(t, lost, "the failover lost events")
	for k, h := range archived {
		require.True(t, f.oldEvents[k] == h, "archived bronze row %s is from the drained history", k)
	}
	claims := map[string]bool{}
	for _, rows := range archivedRows(t, f.lake, tables.Silver, "tenant_id", "artifact_id", "version") {
		for _, r := range rows {
			claims[fmt.Sprintf("%s/%s/%d", r[0], r[1], r[2])] = true
		}
	}
	for k := range f.oldClaims {
		if !nowClaims[k] {
			require.True(t, claims[k], "lost promoted claim %s is archived", k)
		}
	}
}

// requireJournalledOnce: every repair commit is named by exactly one
// lake.repaired event, on its tenant's chain, and the event says which
// tables, with counts.
func requireJournalledOnce(t *testing.T, f *forked, commits int) {
	t.Helper()
	named := map[string]int{}
	for id, evs := range repairEvents(t, f.pool) {
		for _, ev := range evs {
			require.NotEmpty(t, ev.Counts)
			for _, tb := range ev.Tables {
				owner := id.String()
				if tb.TenantID != "" { // a lost tenant's table, on the provider chain
					require.Equal(t, uuid.Nil, id)
					owner = tb.TenantID
				}
				named[fmt.Sprintf("%s/%s@%d", owner, tb.Table, tb.DeltaVersion)]++
				require.NotEmpty(t, tb.Archive)
			}
		}
	}
	require.Len(t, named, commits, "%v", named)
	for k, n := range named {
		require.Equal(t, 1, n, "%s is journalled once", k)
	}
}

// TestRepair_PromotedStandbyWroteOverLostTail_RewindDrainEqualsNewJournal is
// issue 11's "real fork" end to end: no drain exits 0 while the lake holds
// the lost timeline; repair refuses to rewind before the fork is accepted;
// after accept-fork a dry run changes nothing; repair rewinds, archives and
// journals; the drain re-applies the new timeline and the lake equals the
// new journal exactly; a second repair has nothing to do.
func TestRepair_PromotedStandbyWroteOverLostTail_RewindDrainEqualsNewJournal(t *testing.T) {
	t.Parallel()
	lake := testkit.FileLake(t)
	f := newForked(t, lake)
	runForkedRepair(t, f)
}

func runForkedRepair(t *testing.T, f *forked) {
	t.Helper()
	f.drainRefused(t)
	untouched := lakeObjects(t, f.lake)

	early, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Empty(t, early.Repaired, "nothing is rewound before the fork is accepted")
	require.Positive(t, early.Remaining)
	require.NotEmpty(t, early.Plan.NotRepaired)
	require.Contains(t, early.Plan.NotRepaired[0].Command, "accept-fork")

	require.Positive(t, f.acceptForks(t))
	f.drainRefused(t) // accepting the fork changes the journal, not the lake

	dry, err := f.repair(t, lakerepair.Options{DryRun: true})
	require.NoError(t, err)
	require.NotEmpty(t, dry.Plan.Tables)
	require.Equal(t, untouched, lakeObjects(t, f.lake), "a dry run writes nothing")
	require.Empty(t, repairEvents(t, f.pool))

	res, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Remaining, "%+v", res.Plan.NotRepaired)
	require.Equal(t, dry.Plan.Digest, res.Plan.Digest, "the dry run showed the plan that ran")
	require.Len(t, res.Repaired, len(dry.Plan.Tables))
	require.NotEmpty(t, res.Journal)
	for _, r := range res.Repaired {
		t.Logf("repaired %s: %s -> delta v%d txn %d, %d rows archived", r.Path, r.Action, r.DeltaVersion, r.TxnVersion, r.RowsArchived)
	}
	t.Logf("last agreed seq %d, journal %+v", res.Plan.Continuity.LastAgreedSeq, res.Journal)
	c, err := lakewriter.CheckLake(context.Background(), f.pool, f.lake)
	require.NoError(t, err)
	require.True(t, c.OK(), "%+v", c)

	f.drain(t)
	requireLakeEqualsJournal(t, f.env)
	requireArchiveHoldsLost(t, f)
	requireJournalledOnce(t, f, len(res.Repaired))
	require.Len(t, archiveManifests(t, f.lake), len(res.Repaired))

	again, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.True(t, again.Nothing(), "%+v", again.Plan)
}

// crashAt fails the nth call at point p (1-based).
func crashAt(p lakerepair.CrashPoint, nth int) func(lakerepair.CrashPoint, string) error {
	n := 0
	return func(q lakerepair.CrashPoint, _ string) error {
		if q != p {
			return nil
		}
		n++
		if n == nth {
			return fmt.Errorf("crash at %s #%d", p, nth)
		}
		return nil
	}
}

// TestRepair_CrashAfterArchiveAfterTableBeforeJournal_RerunSameEndState
// crashes a repair of several tables at each step in turn — after the
// first table's archive, after the first table's commit, before the
// journal event — and re-runs it: the end state is the one an uncrashed
// repair reaches (the lake equals the new journal after a drain, every
// check green), each table is archived once and each repair commit is
// journalled once, and a further run has nothing to do.
func TestRepair_CrashAfterArchiveAfterTableBeforeJournal_RerunSameEndState(t *testing.T) {
	t.Parallel()
	lake := testkit.FileLake(t)
	f := newForked(t, lake)
	require.Positive(t, f.acceptForks(t))
	dry, err := f.repair(t, lakerepair.Options{DryRun: true})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dry.Plan.Tables), 2, "the crash after one table needs several")

	for _, p := range []lakerepair.CrashPoint{lakerepair.AfterArchive, lakerepair.AfterTable, lakerepair.BeforeJournal} {
		_, err := f.repair(t, lakerepair.Options{Crash: crashAt(p, 1)})
		require.ErrorIs(t, err, lakerepair.ErrCrashed, "%s", p)
		require.Empty(t, repairEvents(t, f.pool), "nothing is journalled before the journal step (%s)", p)
	}
	res, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Empty(t, res.Plan.Tables, "the crashed runs committed every table")
	require.NotEmpty(t, res.Journal, "the re-run journals what the crashed runs committed")
	require.Zero(t, res.Remaining)

	f.drain(t)
	requireLakeEqualsJournal(t, f.env)
	requireArchiveHoldsLost(t, f)
	requireJournalledOnce(t, f, len(dry.Plan.Tables))
	require.Len(t, archiveManifests(t, f.lake), len(dry.Plan.Tables), "one archive per table")

	again, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.True(t, again.Nothing(), "%+v", again.Plan)
}

// TestRepair_PromotedStandbyWroteOverLostTail_S3Lake is the rewind end to
// end on S3 (versitygw).
func TestRepair_PromotedStandbyWroteOverLostTail_S3Lake(t *testing.T) {
	t.Parallel()
	f := newForked(t, s3test.NewBucket(t, nil).Store)
	runForkedRepair(t, f)
}

// TestRepair_RewindNeedsVacuumedFiles_RebuildsFromTheDatabase: after the
// promotion, maintenance compacted the tenants' bronze tables (one file
// mixing both timelines) and vacuum deleted the replaced files, which a
// rewind would have to re-add: those tables are rebuilt instead (emptied
// at txn version 0, every row archived), the drain re-materializes them
// from the database, and the lake equals the new journal exactly.
func TestRepair_RewindNeedsVacuumedFiles_RebuildsFromTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := testkit.FileLake(t)
	f := newForked(t, lake)
	require.Positive(t, f.acceptForks(t))
	vacuumed := 0
	for _, id := range tenantIDs(t, f.pool) {
		st := tableStore(t, lake, id, tables.Bronze)
		w, err := delta.OpenWriter(ctx, st, delta.Options{})
		if errors.Is(err, delta.ErrTableNotFound) {
			continue
		}
		require.NoError(t, err)
		_, err = delta.Optimize(ctx, w, delta.OptimizeOptions{SortBy: []string{"seq"}})
		require.NoError(t, err)
		for _, r := range w.Snapshot().Tombstones() {
			p, err := delta.DecodePath(r.Path)
			require.NoError(t, err)
			require.NoError(t, st.Delete(ctx, p))
			vacuumed++
		}
	}
	require.Positive(t, vacuumed, "compaction replaced bronze files")

	res, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Remaining, "%+v", res.Plan.NotRepaired)
	actions := map[string]int{}
	for _, r := range res.Repaired {
		actions[r.Action]++
		if r.Action == lakerepair.ActionRebuild {
			require.Zero(t, r.TxnVersion)
			require.Contains(t, r.Path, "/bronze/events")
		}
	}
	require.Positive(t, actions[lakerepair.ActionRebuild], "%v", actions)

	f.drain(t)
	requireLakeEqualsJournal(t, f.env)
	requireArchiveHoldsLost(t, f)
	again, err := f.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.True(t, again.Nothing(), "%+v", again.Plan)
}

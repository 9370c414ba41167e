package lakerepair_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// env is a deployment's database (as it is now), its key and its lake.
type env struct {
	pool *pgxpool.Pool
	key  *keys.Key
	lake store.Store
}

func (e *env) drainOpts() lakewriter.Options {
	o := testkit.DrainOptions(e.pool, e.lake, e.key)
	o.PoisonBudget, o.Limits, o.WitnessInterval = 2, outbox.Limits{Rows: 40}, time.Nanosecond
	return o
}

func (e *env) lastSeq(t *testing.T) int64 { t.Helper(); return testkit.LastSeq(t, e.pool) }

// drain drains everything with a fresh writer; every pass must succeed.
func (e *env) drain(t *testing.T) { t.Helper(); testkit.Drain(t, e.drainOpts()) }

// drainRefused drains once and requires the continuity refusal.
func (e *env) drainRefused(t *testing.T) {
	t.Helper()
	d, err := lakewriter.New(e.drainOpts())
	require.NoError(t, err)
	_, err = d.DrainOnce(context.Background())
	var ce *lakewriter.ContinuityError
	require.True(t, errors.As(err, &ce), "the drain must refuse, got %v", err)
}

func (e *env) load(t *testing.T, tenants []uuid.UUID, seed uint64) {
	t.Helper()
	testkit.Load(t, e.pool, e.key, workload.Config{Tenants: tenants, Claims: 10, Seed: seed, PromoteRatio: 0.7, RetractRatio: 0.3})
}

func (e *env) repair(t *testing.T, o lakerepair.Options) (*lakerepair.Result, error) {
	t.Helper()
	o.Pool, o.Lake, o.By = e.pool, e.lake, "test"
	if !o.DryRun {
		o.Signer = e.key
	}
	if o.LeaseWait == 0 {
		o.LeaseWait = 10 * time.Second
	}
	return lakerepair.Run(context.Background(), o)
}

// repairAll runs a repair with the default options and requires it to
// leave nothing unrepaired.
func (e *env) repairAll(t *testing.T) *lakerepair.Result {
	t.Helper()
	res, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Zero(t, res.Remaining, "%+v %+v", res.Plan.NotRepaired, res.Plan.Tables)
	return res
}

// requireNothingToRepair runs a second repair and requires it to plan
// nothing (no table, no pending drain, nothing left).
func (e *env) requireNothingToRepair(t *testing.T) {
	t.Helper()
	again, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.True(t, again.Nothing(), "%+v", again.Plan)
}

// requireNoTableToRepair runs a second repair and requires it to plan no
// table.
func (e *env) requireNoTableToRepair(t *testing.T) {
	t.Helper()
	again, err := e.repair(t, lakerepair.Options{})
	require.NoError(t, err)
	require.Empty(t, again.Plan.Tables, "%+v", again.Plan)
}

// acceptForks accepts every fork the fork check reports.
func (e *env) acceptForks(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	fc, err := chainverify.ForkCheck(ctx, e.pool, e.lake, nil)
	require.NoError(t, err)
	n := 0
	for _, f := range fc.Findings {
		_, err := recovery.AcceptFork(ctx, recovery.AcceptOptions{Pool: e.pool, Lake: e.lake, Signer: e.key, Tenant: f.Tenant,
			Reason: "failover to the async standby", By: "test"})
		require.NoError(t, err, "tenant %s", f.Tenant)
		n++
	}
	return n
}

func tenantIDs(t *testing.T, pool *pgxpool.Pool) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM oml.tenants ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	return out
}

// readTable reads cols of every row of every live file of a table (nil
// when the table does not exist), independently of reconcile.
func readTable(t *testing.T, lake store.Store, key tables.TableKey, cols []string) []pq.Row {
	t.Helper()
	return testkit.ReadLakeTable(t, lake, key.Path(), testkit.Read{Columns: cols})
}

// requireLakeEqualsJournal: every tenant's bronze holds exactly one row per
// journal event with its hash, and silver exactly one row per promoted
// claim with the fold's state — read from every file, not through
// reconcile — and reconcile, chain verify and doctor agree.
func requireLakeEqualsJournal(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	for _, id := range tenantIDs(t, e.pool) {
		want := map[int64]string{}
		rows, err := e.pool.Query(ctx, `SELECT seq, hash FROM oml.journal WHERE tenant_id = $1`, id)
		require.NoError(t, err)
		for rows.Next() {
			var s int64
			var h []byte
			require.NoError(t, rows.Scan(&s, &h))
			want[s] = hex.EncodeToString(h)
		}
		rows.Close()
		got := map[int64]string{}
		for _, r := range readTable(t, e.lake, tables.TableKey{Tenant: id, Kind: tables.Bronze}, []string{"seq", "hash"}) {
			s := r[0].(int64)
			_, dup := got[s]
			require.False(t, dup, "tenant %s: bronze holds seq %d twice", id, s)
			got[s] = hex.EncodeToString(r[1].([]byte))
		}
		require.Equal(t, want, got, "tenant %s: bronze.events vs the journal", id)

		wantC := map[string]string{}
		rows, err = e.pool.Query(ctx, `SELECT artifact_id, version, state FROM oml.claims WHERE tenant_id = $1 AND promoted_seq IS NOT NULL`, id)
		require.NoError(t, err)
		for rows.Next() {
			var a, st string
			var v int32
			require.NoError(t, rows.Scan(&a, &v, &st))
			wantC[fmt.Sprintf("%s/%d", a, v)] = st
		}
		rows.Close()
		gotC := map[string]string{}
		for _, r := range readTable(t, e.lake, tables.TableKey{Tenant: id, Kind: tables.Silver}, []string{"artifact_id", "version", "state"}) {
			k := fmt.Sprintf("%s/%d", r[0], r[1])
			_, dup := gotC[k]
			require.False(t, dup, "tenant %s: silver holds %s twice", id, k)
			gotC[k] = r[2].(string)
		}
		require.Equal(t, wantC, gotC, "tenant %s: silver.claims vs the fold", id)
	}
	requireChecksGreen(t, e)
}

func requireChecksGreen(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	rep, err := reconcile.Run(ctx, e.pool, e.lake, reconcile.Options{StaleAfter: time.Hour, TempDir: t.TempDir()})
	require.NoError(t, err)
	require.Zero(t, rep.Total(), "reconcile: %+v", rep.Findings)

	fc, vr := testkit.VerifyChains(t, e.pool, e.lake)
	require.Empty(t, fc.Findings, "fork check")
	require.Empty(t, vr.Findings, "chain verify")
	for _, id := range tenantIDs(t, e.pool) {
		require.NoError(t, journal.CheckFold(ctx, e.pool, id), "fold of tenant %s", id)
	}

	doc := doctor.Run(ctx, doctor.Options{
		DB:   func(context.Context) (*pgxpool.Pool, error) { return e.pool, nil },
		Lake: func(context.Context) (store.Store, error) { return e.lake, nil },
	})
	for _, c := range doc.Checks {
		require.NotEqual(t, doctor.StatusFail, c.Status, "doctor check %s: %s", c.ID, c.Summary)
	}
}

// repairEvents reads every lake.repaired event of the deployment.
func repairEvents(t *testing.T, pool *pgxpool.Pool) map[uuid.UUID][]journal.LakeRepaired {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT tenant_id, payload FROM oml.journal WHERE event_type = 'lake.repaired' ORDER BY tenant_id, seq`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[uuid.UUID][]journal.LakeRepaired{}
	for rows.Next() {
		var id uuid.UUID
		var payload []byte
		require.NoError(t, rows.Scan(&id, &payload))
		p, err := journal.Decode(journal.TypeLakeRepaired, payload)
		require.NoError(t, err)
		out[id] = append(out[id], p.(journal.LakeRepaired))
	}
	require.NoError(t, rows.Err())
	return out
}

// archiveManifests lists the manifest keys under the archive root.
func archiveManifests(t *testing.T, lake store.Store) []string {
	t.Helper()
	objs, err := lake.List(context.Background(), lakerepair.ArchiveRoot+"/", "")
	require.NoError(t, err)
	var out []string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, "/manifest.json") {
			out = append(out, o.Key)
		}
	}
	sort.Strings(out)
	return out
}

// archivedRows reads the archived rows (cols) of every manifest of one
// table kind, keyed by manifest.
func archivedRows(t *testing.T, lake store.Store, kind tables.Kind, cols ...string) map[string][]pq.Row {
	t.Helper()
	ctx := context.Background()
	out := map[string][]pq.Row{}
	for _, key := range archiveManifests(t, lake) {
		b, err := lake.Get(ctx, key)
		require.NoError(t, err)
		var m lakerepair.Manifest
		require.NoError(t, json.Unmarshal(b, &m))
		if m.Table != string(kind) {
			continue
		}
		b, err = lake.Get(ctx, m.RowsFile)
		require.NoError(t, err)
		f, err := pq.Open(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		rs, err := f.Rows(cols...)
		require.NoError(t, err)
		all, err := rs.ReadAll()
		require.NoError(t, err)
		require.EqualValues(t, m.Rows, len(all), "manifest %s counts its rows", key)
		out[key] = all
	}
	return out
}

// lakeObjects is every object under the lake root with its size.
func lakeObjects(t *testing.T, lake store.Store) map[string]int64 {
	t.Helper()
	objs, err := lake.List(context.Background(), "", "")
	require.NoError(t, err)
	out := map[string]int64{}
	for _, o := range objs {
		out[o.Key] = o.Size
	}
	return out
}

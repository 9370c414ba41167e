package lakewriter_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// failover is a deployment on a private primary with a streaming standby
// and a file lake.
type failover struct {
	*bundle
	primary, standby *testdb.Node
	lake             store.Store
}

func newFailover(t *testing.T, tenants int) *failover {
	t.Helper()
	dir := t.TempDir()
	lake, err := store.NewFile(dir)
	require.NoError(t, err)
	return newFailoverOn(t, tenants, lake)
}

func newFailoverOn(t *testing.T, tenants int, lake store.Store) *failover {
	t.Helper()
	primary := testdb.NewPrimary(t)
	url := primary.CreateDatabase(t, "oml", schema.Migrate)
	d := testkit.NewDeploymentAt(t, url, tenants)
	f := &failover{bundle: &bundle{Deployment: d, pool: d.Pool, key: d.Key, tenants: d.Tenants}, primary: primary, lake: lake}
	f.standby = testdb.StartStandby(t, primary)
	return f
}

// virtualIP is a pool on the failover's primary whose connections go to
// whatever socket directory host holds when they are made, like a virtual
// IP: a test moves it to the promoted standby (host.Store, then vip.Reset).
func (f *failover) virtualIP(t *testing.T) (vip *pgxpool.Pool, host *atomic.Value) {
	t.Helper()
	host = &atomic.Value{}
	host.Store(f.primary.SocketDir())
	cfg, err := pgxpool.ParseConfig(f.primary.URL("oml"))
	require.NoError(t, err)
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.Host, cc.Fallbacks = host.Load().(string), nil
		return nil
	}
	vip, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(vip.Close)
	return vip, host
}

// drain drains everything the database has, with a fresh writer.
func (f *failover) drain(t *testing.T) {
	t.Helper()
	d, err := lakewriter.New(f.opts(f.lake))
	require.NoError(t, err)
	f.drainAll(t, d)
}

// promote loses the tail written (and drained) by lost, promotes the
// standby and points the bundle at it.
func (f *failover) promote(t *testing.T, lost func()) {
	t.Helper()
	promoted := testdb.LoseTail(t, f.primary, f.standby, lost)
	f.pool = testdb.OpenPool(t, promoted.URL("oml"))
	f.Pool = f.pool
}

// lakeVersions is every table's Delta version (to show nothing was written).
func lakeVersions(t *testing.T, lake store.Store, b *bundle) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tn := range b.tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: tn, Kind: k}
			st, err := store.Sub(lake, key.Path())
			require.NoError(t, err)
			snap, err := delta.Load(context.Background(), st)
			if errors.Is(err, delta.ErrTableNotFound) {
				continue
			}
			require.NoError(t, err)
			out[key.Path()] = snap.Version()
		}
	}
	return out
}

// loseTail loads kept and drains it, then loads lost and drains it on the
// primary only, and promotes the standby that never received it; it
// returns the last seq both histories hold.
func (f *failover) loseTail(t *testing.T, kept, lost workload.Config) (agreed int64) {
	t.Helper()
	f.load(t, kept)
	f.drain(t)
	agreed = f.lastSeq(t)
	f.promote(t, func() {
		f.load(t, lost)
		f.drain(t)
	})
	return agreed
}

// drainRefused drains once with a fresh writer on b's database and lake and
// requires the continuity check to refuse.
func drainRefused(t *testing.T, b *bundle, lake store.Store) *lakewriter.ContinuityError {
	t.Helper()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	_, err = d.DrainOnce(context.Background())
	return requireRefused(t, err)
}

func requireRefused(t *testing.T, err error) *lakewriter.ContinuityError {
	t.Helper()
	var ce *lakewriter.ContinuityError
	require.Truef(t, errors.As(err, &ce), "want a continuity refusal, got %v", err)
	return ce
}

func frontierCache(t *testing.T, b *bundle) int64 {
	t.Helper()
	var f int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT frontier FROM oml.lake_frontier`).Scan(&f))
	return f
}

// The first case: the standby stopped receiving, the primary wrote
// and the writer drained past it, the primary died, the standby was
// promoted. The first drain must refuse — naming the last seq both agree
// on, both positions and both timelines — write nothing, and leave the
// frontier cache at or below the database's sequence. Then the
// application writes on the promoted database: every drain still refuses
// (diverged), so no row is skipped or duplicated silently.
func TestContinuity_PromotedStandbyLostTail_DrainRefusesThenNewWritesStillRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, 2)
	agreed := f.loseTail(t, workload.Config{Claims: 15, Seed: 1},
		workload.Config{Claims: 40, Seed: 2})
	lost := lakeVersions(t, f.lake, f.bundle)

	ce := drainRefused(t, f.bundle, f.lake)
	c := ce.C
	require.Equal(t, lakewriter.ContinuityAhead, c.State, "nothing was written since: the lake is ahead")
	require.Equal(t, agreed, c.LastAgreedSeq, "the last seq both histories hold")
	require.Greater(t, c.LakePosition, c.DB.LastSeq)
	require.Equal(t, int64(1), c.LakeTimeline)
	require.Equal(t, int64(2), c.DB.Timeline)
	require.NotEmpty(t, c.Tables)
	require.Contains(t, ce.Error(), "agree up to seq")
	require.Equal(t, lost, lakeVersions(t, f.lake, f.bundle), "nothing was written to the lake")
	require.LessOrEqual(t, frontierCache(t, f.bundle), f.lastSeq(t), "the frontier cache never passes the database's sequence")

	// The read-only check says the same.
	rc, err := lakewriter.CheckLake(ctx, f.pool, f.lake)
	require.NoError(t, err)
	require.Equal(t, c.State, rc.State)
	require.Equal(t, c.LastAgreedSeq, rc.LastAgreedSeq)

	// The application goes on writing on the promoted database.
	f.load(t, workload.Config{Claims: 30, Seed: 3})
	for i := 0; i < 2; i++ {
		ce := drainRefused(t, f.bundle, f.lake)
		require.Equal(t, lakewriter.ContinuityDiverged, ce.C.State)
		require.Equal(t, agreed, ce.C.LastAgreedSeq)
	}
	require.Equal(t, lost, lakeVersions(t, f.lake, f.bundle), "still nothing written")
}

// After a short lost tail the promoted database's sequence (WAL-logged 32
// ahead) plus a few new writes is already above the lake's txn versions:
// no number is out of order, yet the lake holds rows for events that no
// longer exist. The check must catch it by content.
func TestContinuity_ShortLostTailNewSeqAboveLake_RefusesByContent(t *testing.T) {
	t.Parallel()
	f := newFailover(t, 1)
	agreed := f.loseTail(t, workload.Config{Claims: 10, Seed: 4},
		workload.Config{Claims: 1, Seed: 5, PromoteRatio: 0.01, RetractRatio: 0.01})
	for seed := uint64(100); f.lastSeq(t) <= agreed+64; seed++ {
		f.load(t, workload.Config{Claims: 10, Seed: seed})
	}
	ce := drainRefused(t, f.bundle, f.lake)
	require.Less(t, ce.C.LakePosition, ce.C.DB.LastSeq, "the numbers alone look fine")
	require.Equal(t, lakewriter.ContinuityDiverged, ce.C.State)
	require.Equal(t, agreed, ce.C.LastAgreedSeq)
}

// A point-in-time restore: same system identifier, a new timeline, the
// database behind the lake. Same refusal.
func TestContinuity_PointInTimeRestoreBehindLake_Refuses(t *testing.T) {
	t.Parallel()
	f := newFailover(t, 2)
	f.load(t, workload.Config{Claims: 10, Seed: 7})
	f.drain(t)
	agreed := f.lastSeq(t)
	backup := testdb.TakeBaseBackup(t, f.primary)
	f.load(t, workload.Config{Claims: 20, Seed: 8})
	f.drain(t)
	restored := backup.Restore(t)
	f.pool = testdb.OpenPool(t, restored.URL("oml"))
	f.Pool = f.pool
	require.Equal(t, f.primary.Identity(t).SystemIdentifier, restored.Identity(t).SystemIdentifier)

	ce := drainRefused(t, f.bundle, f.lake)
	require.Equal(t, lakewriter.ContinuityAhead, ce.C.State)
	require.Equal(t, agreed, ce.C.LastAgreedSeq)
	require.Equal(t, ce.C.LakeSystemIdentifier, ce.C.DB.SystemIdentifier)
	require.Equal(t, int64(2), ce.C.DB.Timeline)
}

// The long-running loop keeps refusing, visibly (the gauge), and writes
// nothing, until it is stopped.
func TestContinuity_RunLoopPromotedStandby_KeepsRefusing(t *testing.T) {
	t.Parallel()
	f := newFailover(t, 1)
	f.loseTail(t, workload.Config{Claims: 5, Seed: 9}, workload.Config{Claims: 10, Seed: 10})
	before := lakeVersions(t, f.lake, f.bundle)
	reg := prometheus.NewRegistry()
	o := f.opts(f.lake)
	o.Metrics = lakewriter.NewMetrics(reg)
	o.ContinuityRecheck = time.Millisecond
	refusals := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Log = testLogger(func(msg string) {
		if msg == "refusing to write: the lake and the database do not share their history" {
			refusals++
			if refusals == 3 {
				cancel()
			}
		}
	})
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	require.NoError(t, d.Run(ctx))
	require.GreaterOrEqual(t, refusals, 3, "it checked again and refused again")
	require.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.ContinuityRefused))
	require.Equal(t, before, lakeVersions(t, f.lake, f.bundle))
}

// Every commit records where its rows came from, and the lake root names
// its deployment; a writer pointed at another deployment's lake refuses.
func TestContinuity_CommitRecordAndDeployment_WrongLakeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 5, Seed: 11})
	dir := t.TempDir()
	lake, err := store.NewFile(dir)
	require.NoError(t, err)
	b.drainInto(t, lake)

	st, err := store.Sub(lake, tables.TableKey{Tenant: b.tenants[0], Kind: tables.Bronze}.Path())
	require.NoError(t, err)
	hist, err := delta.History(ctx, st, delta.HistoryOptions{Limit: 1})
	require.NoError(t, err)
	var ci struct {
		OmlBatch tables.BatchBounds `json:"omlBatch"`
	}
	require.NoError(t, json.Unmarshal(hist[0].CommitInfo, &ci))
	rec := ci.OmlBatch
	require.NotEmpty(t, rec.SystemIdentifier)
	require.Equal(t, int64(1), rec.Timeline)
	require.NotNil(t, rec.Anchor)
	require.NotNil(t, rec.Rows)
	require.Equal(t, rec.End, hist[0].Txns[0].Version, "the txn version is still the batch end")
	require.LessOrEqual(t, rec.Anchor.Seq, rec.End)
	require.Greater(t, rec.Anchor.Seq, rec.Start)
	require.Len(t, rec.Anchor.Digest, 64)

	var sysid, tli string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT system_identifier, timeline FROM oml.lake_frontier`).Scan(&sysid, &tli))
	require.Equal(t, rec.SystemIdentifier, sysid, "the frontier cache records the system identifier")
	require.Equal(t, "1", tli)

	raw, err := os.ReadFile(filepath.Join(dir, lakewriter.DeploymentKey))
	require.NoError(t, err, "the writer wrote the deployment record")
	var dep lakewriter.Deployment
	require.NoError(t, json.Unmarshal(raw, &dep))
	require.Len(t, dep.ProviderGenesisHash, 64)
	require.NotEmpty(t, dep.RootKeyID)

	// Another deployment pointed at this lake.
	other := setup(t, 1)
	other.load(t, workload.Config{Claims: 2, Seed: 12})
	w, err := lakewriter.New(other.opts(lake))
	require.NoError(t, err)
	_, err = w.DrainOnce(ctx)
	ce := requireRefused(t, err)
	require.Equal(t, lakewriter.ContinuityDeployment, ce.C.State)
	require.Contains(t, err.Error(), "another deployment")
	c, err := lakewriter.CheckLake(ctx, other.pool, lake)
	require.NoError(t, err)
	require.Equal(t, lakewriter.ContinuityDeployment, c.State)

	// The read-only check never creates the record.
	fresh, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	c, err = lakewriter.CheckLake(ctx, b.pool, fresh)
	require.NoError(t, err)
	require.True(t, c.OK())
	_, err = fresh.Get(ctx, lakewriter.DeploymentKey)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testLogger calls onMsg with every record's message (the handler is
// called from the writer's goroutine only).
func testLogger(onMsg func(string)) *slog.Logger { return slog.New(&msgHandler{onMsg: onMsg}) }

type msgHandler struct{ onMsg func(string) }

func (h *msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *msgHandler) Handle(_ context.Context, r slog.Record) error {
	h.onMsg(r.Message)
	return nil
}
func (h *msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *msgHandler) WithGroup(string) slog.Handler      { return h }

// A failover under a running writer: the same Drainer (already recovered,
// so the start check does not run again) finds, before its next batch,
// that the database it reaches is now the promoted standby (another
// timeline, the previous batch's anchor gone) and refuses.
func TestContinuity_FailoverUnderRunningWriter_NextBatchRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, 2)
	vip, host := f.virtualIP(t)
	o := f.opts(f.lake)
	o.DB = vip
	d, err := lakewriter.New(o)
	require.NoError(t, err)

	f.load(t, workload.Config{Claims: 10, Seed: 13})
	f.drainAll(t, d)
	var promoted *testdb.Node
	promoted = testdb.LoseTail(t, f.primary, f.standby, func() {
		f.load(t, workload.Config{Claims: 20, Seed: 14})
		f.drainAll(t, d)
	})
	host.Store(promoted.SocketDir())
	vip.Reset()
	f.pool = testdb.OpenPool(t, promoted.URL("oml"))
	f.Pool = f.pool
	before := lakeVersions(t, f.lake, f.bundle)
	f.load(t, workload.Config{Claims: 10, Seed: 15})

	_, err = d.DrainOnce(ctx)
	ce := requireRefused(t, err)
	require.Equal(t, int64(2), ce.C.DB.Timeline)
	require.Equal(t, before, lakeVersions(t, f.lake, f.bundle), "nothing written on the promoted database's rows")
}

// The same refusal with the lake on S3 (a real S3 server).
func TestContinuity_PromotedStandbyLostTail_S3Lake_Refuses(t *testing.T) {
	t.Parallel()
	f := newFailoverOn(t, 2, s3test.NewBucket(t, nil).Store)
	agreed := f.loseTail(t, workload.Config{Claims: 10, Seed: 16},
		workload.Config{Claims: 20, Seed: 17})
	before := lakeVersions(t, f.lake, f.bundle)
	ce := drainRefused(t, f.bundle, f.lake)
	require.Equal(t, lakewriter.ContinuityAhead, ce.C.State)
	require.Equal(t, agreed, ce.C.LastAgreedSeq)
	require.Equal(t, before, lakeVersions(t, f.lake, f.bundle))
}

// One row below a batch's anchor is gone (its transaction committed after
// the anchor's, so a lost WAL tail can take it and keep the anchor): the
// anchor still matches, the recorded row count does not.
func TestContinuity_RowMissingBelowAnchor_CaughtByRowCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 10, Seed: 18})
	lake := store.NewMem()
	b.drainInto(t, lake)
	last := b.lastSeq(t)
	// The second-to-last row of the outbox: inside the newest batch, below
	// its anchor.
	_, err := b.pool.Exec(ctx, `DELETE FROM oml.outbox WHERE seq = (SELECT seq FROM oml.outbox WHERE seq < $1 ORDER BY seq DESC LIMIT 1)`, last)
	require.NoError(t, err)
	c, err := lakewriter.CheckLake(ctx, b.pool, lake)
	require.NoError(t, err)
	require.False(t, c.OK(), "a row the lake drained is gone")
	require.Less(t, c.LastAgreedSeq, last)
	require.Contains(t, c.Detail, "outbox rows when it was drained")
}

// `oml outbox prune` deletes outbox rows every table has applied: a
// recorded anchor whose row is pruned is recognised by its journal event,
// so a pruned outbox is not a lost tail.
func TestContinuity_OutboxPrunedPastAnchor_StillAgrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 19})
	lake := store.NewMem()
	b.drainInto(t, lake)
	_, err := b.pool.Exec(ctx, `DELETE FROM oml.outbox`)
	require.NoError(t, err)
	c, err := lakewriter.CheckLake(ctx, b.pool, lake)
	require.NoError(t, err)
	require.Truef(t, c.OK(), "%+v", c)
	require.Positive(t, c.Anchors)

	// New rows drain on top of the pruned outbox.
	b.load(t, workload.Config{Claims: 3, Seed: 20})
	b.drainInto(t, lake)
}

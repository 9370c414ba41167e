package doctor_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// bundle is one deployment: a migrated, initialised database with tenants
// and a file lake.
type bundle struct {
	pool    *pgxpool.Pool
	key     *keys.Key
	tenants []uuid.UUID
	lake    store.Store
	dbURL   string
}

func setup(t testing.TB, tenants int) *bundle {
	t.Helper()
	d := testkit.NewDeployment(t, tenants)
	b := &bundle{pool: d.Pool, key: d.Key, tenants: d.Tenants, dbURL: d.DB.URL}
	var err error
	b.lake, err = store.NewFile(t.TempDir())
	require.NoError(t, err)
	return b
}

func (b *bundle) load(t testing.TB, claims, poison int, seed uint64) workload.Result {
	t.Helper()
	return testkit.Load(t, b.pool, b.key, workload.Config{
		Tenants: b.tenants, Claims: claims, PromoteRatio: 0.7, RetractRatio: 0.2, Poison: poison, Seed: seed,
	})
}

// drain drains the whole outbox into the lake, as `oml lake drain --once`.
func (b *bundle) drain(t testing.TB, tune func(*lakewriter.Options)) {
	t.Helper()
	o := testkit.DrainOptions(b.pool, b.lake, b.key)
	o.PoisonBudget, o.HorizonTimeout = 2, 30*time.Second
	if tune != nil {
		tune(&o)
	}
	testkit.Drain(t, o)
}

func (b *bundle) lastSeq(t testing.TB) int64 { t.Helper(); return testkit.LastSeq(t, b.pool) }

// options are doctor options over the bundle; tune adjusts thresholds.
func (b *bundle) options(tune func(*doctor.Thresholds)) doctor.Options {
	th := doctor.DefaultThresholds()
	if tune != nil {
		tune(&th)
	}
	return doctor.Options{
		DB:         func(context.Context) (*pgxpool.Pool, error) { return b.pool, nil },
		Lake:       func(context.Context) (store.Store, error) { return b.lake, nil },
		Thresholds: &th,
		Timeout:    60 * time.Second, // -race on two shared cores; speed is the benchmark's business
	}
}

func (b *bundle) doctor(t testing.TB, tune func(*doctor.Thresholds)) doctor.Report {
	t.Helper()
	return doctor.Run(context.Background(), b.options(tune))
}

// check returns one check's result, failing the test if it is missing.
func check(t testing.TB, rep doctor.Report, id string) doctor.Result {
	t.Helper()
	c, ok := rep.Check(id)
	require.Truef(t, ok, "the report has no %s check", id)
	return c
}

// requireStatus asserts a check's status, printing the whole check when not.
func requireStatus(t testing.TB, rep doctor.Report, id string, want doctor.Status) doctor.Result {
	t.Helper()
	c := check(t, rep, id)
	require.Equalf(t, want, c.Status, "%s: %s\n%v", id, c.Summary, c.Details)
	return c
}

// holdHorizon opens a transaction with an xid on another connection and
// keeps it open until the test ends; it returns the backend's pid.
func holdHorizon(t testing.TB, b *bundle) int32 {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(b.dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = "horizon-holder"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	})
	var pid int32
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	var xid uint64
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&xid))
	// From here on the horizon cannot pass xid until the test ends.
	h, err := outbox.Horizon(ctx, b.pool)
	require.NoError(t, err)
	require.LessOrEqual(t, h, xid)
	return pid
}

// notConditional is a store whose put-if-absent overwrites, like an S3
// gateway that ignores If-None-Match.
type notConditional struct{ store.Store }

func (n notConditional) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return n.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

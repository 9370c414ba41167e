package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type bundle struct {
	pool    *pgxpool.Pool
	key     *keys.Key
	tenants []uuid.UUID
	lake    store.Store
}

// setup gives a migrated, initialised database with n tenants and an empty
// lake on the file store.
func setup(t *testing.T, n int) *bundle {
	t.Helper()
	d := testkit.NewDeployment(t, n)
	lake, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	return &bundle{pool: d.Pool, key: d.Key, lake: lake, tenants: d.Tenants}
}

func (b *bundle) load(t *testing.T, cfg workload.Config) workload.Result {
	t.Helper()
	if cfg.Tenants == nil {
		cfg.Tenants = b.tenants
	}
	if cfg.PromoteRatio == 0 {
		cfg.PromoteRatio = 0.7
	}
	if cfg.RetractRatio == 0 {
		cfg.RetractRatio = 0.3
	}
	res, err := workload.Run(context.Background(), b.pool, b.key, cfg)
	require.NoError(t, err)
	return res
}

func (b *bundle) lastSeq(t *testing.T) int64 {
	t.Helper()
	var s int64
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox','seq')::regclass), 0)`).Scan(&s))
	return s
}

// drain runs the real lake writer until the lake holds the whole outbox and
// returns the outbox seqs it dead-lettered.
func (b *bundle) drain(t *testing.T) []int64 {
	t.Helper()
	d, err := lakewriter.New(lakewriter.Options{
		DB: b.pool, Lake: b.lake, Signer: b.key, NoLease: true, PoisonBudget: 2,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond, Poll: 5 * time.Millisecond,
		HorizonTimeout: 20 * time.Second, Limits: outbox.Limits{Rows: 50},
	})
	require.NoError(t, err)
	var dead []int64
	for i := 0; i < 50; i++ {
		sum, err := d.DrainOnce(context.Background())
		require.NoError(t, err)
		dead = append(dead, sum.DeadLettered...)
		if d.Frontier() >= b.lastSeq(t) {
			return dead
		}
	}
	t.Fatalf("the lake never caught up with the outbox (frontier %d, last seq %d)", d.Frontier(), b.lastSeq(t))
	return nil
}

func (b *bundle) reconcile(t *testing.T, opts reconcile.Options) *reconcile.Report {
	t.Helper()
	if opts.StaleAfter == 0 {
		opts.StaleAfter = time.Hour
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	rep, err := reconcile.Run(context.Background(), b.pool, b.lake, opts)
	require.NoError(t, err)
	return rep
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// byClass groups findings by class.
func byClass(rep *reconcile.Report) map[reconcile.Class][]reconcile.Finding {
	out := map[reconcile.Class][]reconcile.Finding{}
	for _, f := range rep.Findings {
		out[f.Class] = append(out[f.Class], f)
	}
	return out
}

// requireClean fails with the findings when the report has any.
func requireClean(t *testing.T, rep *reconcile.Report) {
	t.Helper()
	if !rep.OK {
		for _, f := range rep.Findings {
			t.Logf("%s %s %s %s v%d seq %d outbox %d: %s", f.Class, f.TenantName, f.Table, f.ArtifactID, f.Version, f.Seq, f.OutboxSeq, f.Detail)
		}
	}
	require.True(t, rep.OK, "expected no findings, got %v", rep.Counts)
	require.Empty(t, rep.Findings)
}

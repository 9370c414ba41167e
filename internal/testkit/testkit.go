// Package testkit is what the database-and-lake tests of several packages
// share (lakewriter, maintain, doctor, reconcile): the TestMain that gives a
// test binary its throwaway PostgreSQL cluster and real S3 server, a
// deployment (migrated, initialised database with tenants), and the lake
// writer options and drain loop tests use. It is imported only by tests.
package testkit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/workload"
)

// Main is a TestMain: a throwaway PostgreSQL cluster whose databases are
// cloned from a migrated template, and (when a test asks for one) a real S3
// server; both are removed at the end.
func Main(m *testing.M) {
	testdb.Configure(testdb.WithTemplate(schema.Migrate))
	code := s3test.Main(m)
	if err := testdb.Shutdown(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// Deployment is a migrated database with the deployment genesis done
// (`oml init`) and some tenants.
type Deployment struct {
	DB      *testdb.DB
	Pool    *pgxpool.Pool
	Key     *keys.Key
	Tenants []uuid.UUID
}

// NameFormat names the tenants NewDeployment creates (one %d verb).
const NameFormat = "tenant-%02d"

// NewDeployment creates a fresh database with n tenants.
func NewDeployment(t testing.TB, n int) *Deployment {
	t.Helper()
	return NewDeploymentOn(t, testdb.New(t), n)
}

// NewDeploymentNamed creates a fresh database with the tenants names, in
// that order (none: only the provider chain).
func NewDeploymentNamed(t testing.TB, names ...string) *Deployment {
	t.Helper()
	db := testdb.New(t)
	d := deployNamed(t, db.Pool(t), names)
	d.DB = db
	return d
}

// NewDeploymentOn is NewDeployment on a database the test already has.
func NewDeploymentOn(t testing.TB, db *testdb.DB, n int) *Deployment {
	t.Helper()
	d := deploy(t, db.Pool(t), n)
	d.DB = db
	return d
}

// NewDeploymentAt is NewDeployment on a database known only by its URL (a
// private cluster from testdb.NewPrimary, say); DB stays nil.
func NewDeploymentAt(t testing.TB, url string, n int) *Deployment {
	t.Helper()
	return deploy(t, testdb.OpenPool(t, url), n)
}

func deploy(t testing.TB, pool *pgxpool.Pool, n int) *Deployment {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(NameFormat, i)
	}
	return deployNamed(t, pool, names)
}

func deployNamed(t testing.TB, pool *pgxpool.Pool, names []string) *Deployment {
	t.Helper()
	ctx := context.Background()
	k, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(t, err)
	d := &Deployment{Pool: pool, Key: k}
	for _, name := range names {
		tn, _, err := tenant.Create(ctx, pool, k, name)
		require.NoError(t, err)
		d.Tenants = append(d.Tenants, tn.ID)
	}
	return d
}

// LastSeq is the outbox sequence's last value (0 if none was drawn).
func (d *Deployment) LastSeq(t testing.TB) int64 { return LastSeq(t, d.Pool) }

// LastSeq is the last value of pool's outbox sequence (0 if none was
// drawn): the seq a drain must reach to hold the whole outbox.
func LastSeq(t testing.TB, pool *pgxpool.Pool) int64 {
	t.Helper()
	var s int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox','seq')::regclass), 0)`).Scan(&s))
	return s
}

// DrainOptions are lake writer options for tests: no lease, millisecond
// backoffs and polls, a small poison budget.
func (d *Deployment) DrainOptions(lake store.Store) lakewriter.Options {
	return DrainOptions(d.Pool, lake, d.Key)
}

// DrainOptions are the deployment-less form of Deployment.DrainOptions,
// for tests that hold only a pool (a promoted copy, a restored database);
// a nil signer leaves Options.Signer nil, so the writer journals no
// materialize.skipped and publishes no witness.
func DrainOptions(pool *pgxpool.Pool, lake store.Store, signer *keys.Key) lakewriter.Options {
	o := lakewriter.Options{
		DB: pool, Lake: lake,
		NoLease: true, PoisonBudget: 3,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond,
		Poll: 5 * time.Millisecond, HorizonTimeout: 20 * time.Second,
	}
	if signer != nil { // a nil *keys.Key in the interface would not be nil
		o.Signer = signer
	}
	return o
}

// DrainAll runs DrainOnce until the lake holds the whole outbox and returns
// what the passes did together.
func (d *Deployment) DrainAll(t testing.TB, w *lakewriter.Drainer) lakewriter.Summary {
	t.Helper()
	return DrainAll(t, d.Pool, w)
}

// DrainAll runs w's DrainOnce until its frontier reaches pool's last
// outbox seq (every pass must succeed) and returns what the passes did
// together.
func DrainAll(t testing.TB, pool *pgxpool.Pool, w *lakewriter.Drainer) lakewriter.Summary {
	t.Helper()
	var total lakewriter.Summary
	for i := 0; i < 60; i++ {
		sum, err := w.DrainOnce(context.Background())
		require.NoError(t, err)
		total.Batches += sum.Batches
		total.Rows += sum.Rows
		total.TableCommits += sum.TableCommits
		total.DeadLettered = append(total.DeadLettered, sum.DeadLettered...)
		if w.Frontier() >= LastSeq(t, pool) {
			return total
		}
	}
	t.Fatalf("the lake never caught up with the outbox (frontier %d, last seq %d)", w.Frontier(), LastSeq(t, pool))
	return total
}

// Drain drains the whole outbox with a fresh writer on o, as
// `oml lake drain --once` does, and returns what the passes did together.
func Drain(t testing.TB, o lakewriter.Options) lakewriter.Summary {
	t.Helper()
	w, err := lakewriter.New(o)
	require.NoError(t, err)
	return DrainAll(t, o.DB, w)
}

// Mix is a test package's usual share of promoted and of retracted claims.
type Mix struct{ Promote, Retract float64 }

// Load runs the workload cfg on the deployment: on all its tenants unless
// cfg names some, with the ratios cfg leaves zero taken from mix.
func (d *Deployment) Load(t testing.TB, cfg workload.Config, mix Mix) workload.Result {
	t.Helper()
	if cfg.Tenants == nil {
		cfg.Tenants = d.Tenants
	}
	if cfg.PromoteRatio == 0 {
		cfg.PromoteRatio = mix.Promote
	}
	if cfg.RetractRatio == 0 {
		cfg.RetractRatio = mix.Retract
	}
	return Load(t, d.Pool, d.Key, cfg)
}

// Load runs the workload cfg on pool, signed with key.
func Load(t testing.TB, pool *pgxpool.Pool, key *keys.Key, cfg workload.Config) workload.Result {
	t.Helper()
	res, err := workload.Run(context.Background(), pool, key, cfg)
	require.NoError(t, err)
	return res
}

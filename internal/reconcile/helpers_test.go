package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type bundle struct {
	*testkit.Deployment
	lake store.Store
}

// setup gives a migrated, initialised database with n tenants and an empty
// lake on the file store.
func setup(t *testing.T, n int) *bundle {
	t.Helper()
	lake := testkit.FileLake(t)
	return &bundle{Deployment: testkit.NewDeployment(t, n), lake: lake}
}

func (b *bundle) load(t *testing.T, cfg workload.Config) workload.Result {
	t.Helper()
	return b.Load(t, cfg, testkit.Mix{Promote: 0.7, Retract: 0.3})
}

// drainOpts are the lake writer's options for this package's tests.
func (b *bundle) drainOpts() lakewriter.Options {
	o := b.DrainOptions(b.lake)
	o.PoisonBudget, o.Limits = 2, outbox.Limits{Rows: 50}
	return o
}

// drain runs the real lake writer until the lake holds the whole outbox and
// returns the outbox seqs it dead-lettered.
func (b *bundle) drain(t *testing.T) []int64 {
	t.Helper()
	return testkit.Drain(t, b.drainOpts()).DeadLettered
}

func (b *bundle) reconcile(t *testing.T, opts reconcile.Options) *reconcile.Report {
	t.Helper()
	if opts.StaleAfter == 0 {
		opts.StaleAfter = time.Hour
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	rep, err := reconcile.Run(context.Background(), b.Pool, b.lake, opts)
	require.NoError(t, err)
	return rep
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.Pool.Exec(context.Background(), sql, args...)
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

// requireOneEach requires the report to hold exactly one finding of each
// class and no other, and returns them by class.
func requireOneEach(t *testing.T, rep *reconcile.Report, classes ...reconcile.Class) map[reconcile.Class][]reconcile.Finding {
	t.Helper()
	got := byClass(rep)
	for _, c := range classes {
		require.Len(t, got[c], 1, "%v", rep.Findings)
	}
	require.Equal(t, int64(len(classes)), rep.Total(), "%v", rep.Findings)
	return got
}

package outboxprune_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type bundle struct {
	*testkit.Deployment
}

func setup(t *testing.T, tenants int) *bundle {
	t.Helper()
	return &bundle{Deployment: testkit.NewDeployment(t, tenants)}
}

func (b *bundle) load(t *testing.T, cfg workload.Config) workload.Result {
	t.Helper()
	return b.Load(t, cfg, testkit.Mix{Promote: 0.7, Retract: 0.3})
}

func (b *bundle) drainer(t *testing.T, lake store.Store, mod func(*lakewriter.Options)) *lakewriter.Drainer {
	t.Helper()
	o := b.DrainOptions(lake)
	o.Limits = outbox.Limits{Rows: 40}
	if mod != nil {
		mod(&o)
	}
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	return d
}

func (b *bundle) prune(t *testing.T, lake store.Store, dry bool) outbox.PruneResult {
	t.Helper()
	res, err := outboxprune.Run(context.Background(), outboxprune.Options{DB: b.Pool, Lake: lake, BatchRows: 37, DryRun: dry})
	require.NoError(t, err)
	return res
}

func (b *bundle) outboxRows(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.Pool.QueryRow(context.Background(), `SELECT count(*) FROM oml.outbox`).Scan(&n))
	return n
}

// reconcileClean runs the audit (the journal fold against every table) and
// requires no finding but the dead letters the test planted.
func (b *bundle) reconcileClean(t *testing.T, lake store.Store) {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), b.Pool, lake, reconcile.Options{StaleAfter: -1})
	require.NoError(t, err)
	for _, f := range rep.Findings {
		if f.Class == reconcile.DeadLettered {
			continue
		}
		t.Errorf("reconcile finding: %s %s %s seq %d %s v%d: %s", f.Class, f.Tenant, f.Table, f.Seq, f.ArtifactID, f.Version, f.Detail)
	}
	// And the outbox is the fold's rows less a pruned prefix per table.
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, b.Tenants...) {
		require.NoError(t, journal.CheckFold(context.Background(), b.Pool, tn))
	}
}

func newLake(t *testing.T, kind string) store.Store {
	t.Helper()
	if kind == "s3" {
		return s3test.NewBucket(t, nil).Store
	}
	st, err := store.Open(context.Background(), "file://"+t.TempDir())
	require.NoError(t, err)
	return st
}

// deleteTable removes every object of a table (log and data): the table
// is gone, as if its prefix had been deleted from the store.
func deleteTable(t *testing.T, lake store.Store, key tables.TableKey) {
	t.Helper()
	ctx := context.Background()
	objs, err := lake.List(ctx, key.Path()+"/", "")
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	for _, o := range objs {
		require.NoError(t, lake.Delete(ctx, o.Key))
	}
}

// tableRows reads every row of a table, rendered as sorted strings with the
// outbox_seq column left out when skipSeq (a rebuilt table's re-derived
// rows have no outbox seq). nil when the table does not exist.
func tableRows(t *testing.T, lake store.Store, key tables.TableKey, skipSeq bool) []string {
	t.Helper()
	st, err := store.Sub(lake, key.Path())
	require.NoError(t, err)
	snap, err := delta.Load(context.Background(), st)
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil
	}
	require.NoError(t, err)
	seqCol := -1
	for i, f := range snap.Schema().Fields {
		if f.Name == "outbox_seq" || f.Name == tables.WorkareaLastOutboxSeq.Name() { // a workarea row of only re-derived changes: null
			seqCol = i
		}
	}
	var out []string
	require.NoError(t, snap.Scan(context.Background(), st, delta.ScanOptions{}, func(_ *delta.Add, rows []pq.Row) error {
		for _, r := range rows {
			var sb strings.Builder
			for i, v := range r {
				if skipSeq && i == seqCol {
					continue
				}
				fmt.Fprintf(&sb, "%v|", v)
			}
			out = append(out, sb.String())
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

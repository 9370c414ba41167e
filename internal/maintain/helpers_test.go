package maintain_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type bundle struct {
	*testkit.Deployment
	lake    store.Store
	lakeDir string
}

// setup gives a migrated, initialised database with n tenants and an
// empty file lake.
func setup(t *testing.T, n int) *bundle {
	t.Helper()
	return setupOn(t, n, nil)
}

// setupOn is setup with the lake in the given store (nil: a file lake in a
// temporary directory).
func setupOn(t *testing.T, n int, lake store.Store) *bundle {
	t.Helper()
	b := &bundle{Deployment: testkit.NewDeployment(t, n), lakeDir: t.TempDir()}
	if b.lake = lake; lake == nil {
		var err error
		b.lake, err = store.NewFile(b.lakeDir)
		require.NoError(t, err)
	}
	return b
}

func (b *bundle) load(t *testing.T, cfg workload.Config) workload.Result {
	t.Helper()
	return b.Load(t, cfg, testkit.Mix{})
}

func (b *bundle) drainer(t *testing.T, rows int) *lakewriter.Drainer {
	t.Helper()
	o := b.DrainOptions(b.lake)
	o.Limits = outbox.Limits{Rows: rows}
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	return d
}

// drainAll runs DrainOnce until the lake holds the whole outbox.
func (b *bundle) drainAll(t *testing.T, d *lakewriter.Drainer) { t.Helper(); b.DrainAll(t, d) }

func (b *bundle) tables(t *testing.T, kinds ...tables.Kind) []maintain.Table {
	t.Helper()
	if len(kinds) == 0 {
		kinds = nil
	}
	tabs, err := maintain.Tables(b.lake, append([]uuid.UUID{journal.ProviderTenant}, b.Tenants...), kinds)
	require.NoError(t, err)
	return tabs
}

// readRows reads every live row of the table at st (nil: no table).
// firstTenantTable is the first tenant's table of kind.
func (b *bundle) firstTenantTable(t *testing.T, kind tables.Kind) maintain.Table {
	t.Helper()
	var out maintain.Table
	for _, tab := range b.tables(t, kind) {
		if tab.Key.Tenant == b.Tenants[0] {
			out = tab
		}
	}
	require.NotNil(t, out.Store)
	return out
}

// requireReconcileClean runs reconcile over the whole deployment and
// requires no finding.
func (b *bundle) requireReconcileClean(t *testing.T) {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), b.Pool, b.lake, reconcile.Options{StaleAfter: time.Hour, TempDir: t.TempDir()})
	require.NoError(t, err)
	require.Zero(t, rep.Total(), "%+v", rep.Findings)
}

func readRows(t *testing.T, st store.Store) []pq.Row {
	t.Helper()
	return testkit.ReadTable(t, st, testkit.Read{})
}

func (b *bundle) sub(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := store.Sub(b.lake, path)
	require.NoError(t, err)
	return st
}

// verifyLake checks that the lake equals the journal fold exactly once
// (the lake writer's own check, internal/lakewriter/helpers_test.go, with
// one difference maintenance makes): bronze holds every journal event
// once; silver holds one row per promoted (artifact_id, version) in its
// fold state; a body is either the ciphertext that hashes to the
// journalled digest or, for an erased claim whose body maintenance
// already erased, null.
func (b *bundle) verifyLake(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, b.Tenants...) {
		got := map[int64]int{}
		for _, row := range readRows(t, b.sub(t, tables.TableKey{Tenant: tn, Kind: tables.Bronze}.Path())) {
			r := tables.DecodeBronze(row)
			require.Equal(t, tn.String(), r.TenantID)
			got[r.Seq]++
		}
		q, err := b.Pool.Query(ctx, `SELECT seq FROM oml.journal WHERE tenant_id = $1 ORDER BY seq`, tn)
		require.NoError(t, err)
		for q.Next() {
			var s int64
			require.NoError(t, q.Scan(&s))
			require.Equalf(t, 1, got[s], "tenant %s: journal event %d appears %d times in bronze", tn, s, got[s])
			delete(got, s)
		}
		require.NoError(t, q.Err())
		require.Emptyf(t, got, "tenant %s: bronze rows the journal does not explain", tn)
	}

	type key struct {
		tenant, artifact string
		version          int32
	}
	type fold struct{ state, digest string }
	want := map[key]fold{}
	q, err := b.Pool.Query(ctx, `SELECT tenant_id::text, artifact_id, version, state, encode(ciphertext_digest, 'hex')
FROM oml.claims WHERE promoted_seq IS NOT NULL`)
	require.NoError(t, err)
	for q.Next() {
		var k key
		var f fold
		require.NoError(t, q.Scan(&k.tenant, &k.artifact, &k.version, &f.state, &f.digest))
		want[k] = f
	}
	require.NoError(t, q.Err())
	got := map[key]bool{}
	for _, tn := range b.Tenants {
		for _, row := range readRows(t, b.sub(t, tables.TableKey{Tenant: tn, Kind: tables.Silver}.Path())) {
			r := tables.DecodeSilver(row)
			k := key{r.TenantID, r.ArtifactID, r.Version}
			require.Falsef(t, got[k], "silver holds %v twice", k)
			got[k] = true
			f, ok := want[k]
			require.Truef(t, ok, "silver holds %v, which was never promoted", k)
			require.Equalf(t, f.state, r.State, "silver state of %v", k)
			require.Equal(t, f.digest, r.CiphertextDigest)
			if r.Body != nil {
				sum := sha256.Sum256(r.Body)
				require.Equalf(t, f.digest, hex.EncodeToString(sum[:]), "silver body of %v does not hash to the journalled digest", k)
			} else {
				require.Equalf(t, "erased", f.state, "silver body of %v is null but the claim is not erased", k)
			}
		}
	}
	require.Equal(t, len(want), len(got), "silver row count")
}

// logActions is one commit's adds and removes (decoded paths).
type logActions struct {
	op      string
	adds    []string
	removes []string
}

// readLog reads every commit of a table from its JSON files.
func readLog(t *testing.T, st store.Store) []logActions {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	var out []logActions
	for v := int64(0); v <= snap.Version(); v++ {
		body, err := st.Get(ctx, fmt.Sprintf("_delta_log/%020d.json", v))
		require.NoError(t, err)
		var la logActions
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var a struct {
				CommitInfo *struct {
					Operation string `json:"operation"`
				} `json:"commitInfo"`
				Add    *struct{ Path string } `json:"add"`
				Remove *struct{ Path string } `json:"remove"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &a))
			switch {
			case a.CommitInfo != nil:
				la.op = a.CommitInfo.Operation
			case a.Add != nil:
				p, err := delta.DecodePath(a.Add.Path)
				require.NoError(t, err)
				la.adds = append(la.adds, p)
			case a.Remove != nil:
				p, err := delta.DecodePath(a.Remove.Path)
				require.NoError(t, err)
				la.removes = append(la.removes, p)
			}
		}
		require.NoError(t, sc.Err())
		out = append(out, la)
	}
	return out
}

// requireLogSound replays a table's log and checks that every remove names
// a file live just before it, and no add ever brings back a path that was
// added (or removed) before: no commit re-adds a file another removed.
func requireLogSound(t *testing.T, name string, log []logActions) {
	t.Helper()
	live := map[string]bool{}
	seen := map[string]int{}
	for v, la := range log {
		for _, p := range la.removes {
			require.Truef(t, live[p], "%s v%d (%s) removes %s, which is not live", name, v, la.op, p)
			delete(live, p)
		}
		for _, p := range la.adds {
			prev, again := seen[p]
			require.Falsef(t, again, "%s v%d (%s) re-adds %s, first added at v%d", name, v, la.op, p, prev)
			seen[p] = v
			live[p] = true
		}
	}
}

func isNotFound(err error) bool { return errors.Is(err, delta.ErrTableNotFound) }

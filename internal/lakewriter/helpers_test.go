package lakewriter_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type bundle struct {
	*testkit.Deployment
	pool    *pgxpool.Pool
	key     *keys.Key
	tenants []uuid.UUID
	// poison is every row a test planted as poison (b.load records the
	// workload's; expectDead adds others): verifyLake requires the
	// dead-lettered rows to be exactly these.
	poisonMu sync.Mutex
	poison   map[int64]bool
}

// expectDead records outbox rows the test made poison by other means than
// the workload, so verifyLake expects them dead-lettered.
func (b *bundle) expectDead(seqs ...int64) {
	b.poisonMu.Lock()
	defer b.poisonMu.Unlock()
	if b.poison == nil {
		b.poison = map[int64]bool{}
	}
	for _, s := range seqs {
		b.poison[s] = true
	}
}

// tamper edits the payloads of the first len(edits) outbox rows of tenant's
// target with op, in seq order (edits[i] is a jsonb expression of payload
// for the i-th), expects each dead-lettered, and returns their seqs.
func (b *bundle) tamper(t *testing.T, tn uuid.UUID, target, op string, edits ...string) []int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT seq FROM oml.outbox WHERE tenant_id = $1 AND target = $2 AND op = $3 ORDER BY seq LIMIT $4`,
		tn, target, op, len(edits))
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, seqs, len(edits))
	for i, edit := range edits {
		_, err := b.pool.Exec(ctx, `UPDATE oml.outbox SET payload = `+edit+` WHERE seq = $1`, seqs[i])
		require.NoError(t, err)
		b.expectDead(seqs[i])
	}
	return seqs
}

// drainLifecycles loads, on two tenants, a randomized workload of
// promotions, demotions, erasures, reassignments and simulation ends
// (several changes per claim), drawn from seed and the test's rng stream,
// and drains it in small batches into a memory lake.
func drainLifecycles(t *testing.T, seed, stream uint64) (*bundle, workload.Result, store.Store) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, stream))
	b := setup(t, 2)
	res := b.load(t, workload.Config{Claims: 20 + rng.IntN(20), Seed: seed, PromoteRatio: 0.8, RetractRatio: 0.7,
		FollowUpRatio: 0.8, Batch: 1 + rng.IntN(4)})
	lake := store.NewMem()
	o := b.opts(lake)
	o.Limits = lakewriterLimits(3 + rng.IntN(30))
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)
	return b, res, lake
}

// setup gives a migrated, initialised database with n tenants.
func setup(t *testing.T, n int) *bundle {
	t.Helper()
	return setupOn(t, testdb.New(t), n)
}

func setupOn(t *testing.T, db *testdb.DB, n int) *bundle {
	t.Helper()
	d := testkit.NewDeploymentOn(t, db, n)
	return &bundle{Deployment: d, pool: d.Pool, key: d.Key, tenants: d.Tenants}
}

func (b *bundle) load(t *testing.T, cfg workload.Config) workload.Result {
	t.Helper()
	res := b.Load(t, cfg, testkit.Mix{Promote: 0.7, Retract: 0.2})
	for _, p := range res.Poison {
		b.expectDead(p.OutboxSeq)
	}
	return res
}

func (b *bundle) opts(lake store.Store) lakewriter.Options {
	o := b.DrainOptions(lake)
	o.Limits = limitsSmall
	return o
}

var limitsSmall = lakewriterLimits(50)

func (b *bundle) lastSeq(t testing.TB) int64 { return b.LastSeq(t) }

// drainAll runs DrainOnce until the lake holds the whole outbox.
func (b *bundle) drainAll(t *testing.T, d *lakewriter.Drainer) lakewriter.Summary {
	t.Helper()
	return b.DrainAll(t, d)
}

// drainInto drains the whole outbox into lake with a new drainer of the
// bundle's options.
func (b *bundle) drainInto(t *testing.T, lake store.Store) lakewriter.Summary {
	t.Helper()
	d, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	return b.drainAll(t, d)
}

type lakeRow struct {
	tenant    string
	seq       int64
	outboxSeq int64
}

type silverRow struct {
	state        string
	cipherDigest string
	bodyDigest   string
	outboxSeq    int64
	count        int
}

// readTable scans a table (nil rows if it does not exist).
func readTable(t *testing.T, lake store.Store, path string) []pq.Row {
	t.Helper()
	return testkit.ReadLakeTable(t, lake, path, testkit.Read{})
}

// readTyped reads the rows of tenant's table of kind k, decoded.
func readTyped[R any](t *testing.T, lake store.Store, tn uuid.UUID, k tables.Kind, decode func(pq.Row) R) []R {
	t.Helper()
	var out []R
	for _, r := range readTable(t, lake, tables.TableKey{Tenant: tn, Kind: k}.Path()) {
		out = append(out, decode(r))
	}
	return out
}

// readBronze reads tenant's bronze.events rows.
func readBronze(t *testing.T, lake store.Store, tn uuid.UUID) []tables.BronzeRow {
	t.Helper()
	return readTyped(t, lake, tn, tables.Bronze, tables.DecodeBronze)
}

// readSilver reads tenant's silver.claims rows.
func readSilver(t *testing.T, lake store.Store, tn uuid.UUID) []tables.SilverRow {
	t.Helper()
	return readTyped(t, lake, tn, tables.Silver, tables.DecodeSilver)
}

// verifyLake checks that the lake equals the journal fold exactly once:
//   - bronze: every journal event of every tenant exactly once (no bronze
//     row is ever poisoned by the workload);
//   - silver: one row per promoted (artifact_id, version) whose
//     materialize row is not dead-lettered, in the state that replaying the
//     applied (not dead-lettered) silver outbox rows gives, which is the
//     fold's state for every claim no dead letter touched; bodies hash to
//     the journalled ciphertext digest;
//   - dead letters: exactly the rows the test planted as poison (a valid
//     row dead-lettered, e.g. for an outage taken for its own fault, would
//     otherwise pass the silver check, which leaves dead-lettered claims
//     out).
func (b *bundle) verifyLake(t *testing.T, lake store.Store) {
	t.Helper()
	ctx := context.Background()

	// dead letters
	var deadSeqs []int64
	dl, err := b.pool.Query(ctx, `SELECT outbox_seq FROM oml.dead_letter WHERE reenqueued_at IS NULL ORDER BY outbox_seq`)
	require.NoError(t, err)
	for dl.Next() {
		var s int64
		require.NoError(t, dl.Scan(&s))
		deadSeqs = append(deadSeqs, s)
	}
	require.NoError(t, dl.Err())
	b.poisonMu.Lock()
	planted := make([]int64, 0, len(b.poison))
	for s := range b.poison {
		planted = append(planted, s)
	}
	b.poisonMu.Unlock()
	require.Equal(t, sortedInt64(planted), sortedInt64(deadSeqs), "the dead-lettered rows must be exactly the planted poison")
	tenants := append([]uuid.UUID{journal.ProviderTenant}, b.tenants...)

	// bronze
	for _, tn := range tenants {
		rows := readBronze(t, lake, tn)
		got := map[int64]int{}
		for _, r := range rows {
			require.Equal(t, tn.String(), r.TenantID)
			got[r.Seq]++
		}
		var want []int64
		q, err := b.pool.Query(ctx, `SELECT seq FROM oml.journal WHERE tenant_id = $1 ORDER BY seq`, tn)
		require.NoError(t, err)
		for q.Next() {
			var s int64
			require.NoError(t, q.Scan(&s))
			want = append(want, s)
		}
		require.NoError(t, q.Err())
		for _, s := range want {
			require.Equalf(t, 1, got[s], "tenant %s: journal event %d appears %d times in bronze", tn, s, got[s])
			delete(got, s)
		}
		require.Emptyf(t, got, "tenant %s: bronze rows the journal does not explain", tn)
	}

	// silver: replay the applied silver outbox rows.
	type key struct {
		tenant, artifact string
		version          int32
	}
	expect := map[key]string{}
	dead := map[key]bool{}
	q, err := b.pool.Query(ctx, `
SELECT o.tenant_id::text, o.artifact_id, o.version, o.op, o.payload->>'state', d.outbox_seq IS NOT NULL
FROM oml.outbox o LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq AND d.reenqueued_at IS NULL
WHERE o.target = 'silver.claims' ORDER BY o.seq`)
	require.NoError(t, err)
	for q.Next() {
		var k key
		var op string
		var state *string
		var isDead bool
		require.NoError(t, q.Scan(&k.tenant, &k.artifact, &k.version, &op, &state, &isDead))
		if isDead {
			dead[k] = true
			continue
		}
		switch op {
		case "materialize":
			expect[k] = "promoted"
		case "retract":
			if _, ok := expect[k]; ok && state != nil {
				expect[k] = *state
			}
		}
	}
	require.NoError(t, q.Err())

	// The replay agrees with the fold wherever no dead letter interfered.
	fq, err := b.pool.Query(ctx, `SELECT tenant_id::text, artifact_id, version, state FROM oml.claims WHERE promoted_seq IS NOT NULL`)
	require.NoError(t, err)
	for fq.Next() {
		var k key
		var state string
		require.NoError(t, fq.Scan(&k.tenant, &k.artifact, &k.version, &state))
		if !dead[k] {
			require.Equalf(t, state, expect[k], "fold and outbox replay disagree on %v", k)
		}
	}
	require.NoError(t, fq.Err())

	digests := map[key]string{}
	dq, err := b.pool.Query(ctx, `SELECT tenant_id::text, artifact_id, version, encode(ciphertext_digest, 'hex') FROM oml.claims`)
	require.NoError(t, err)
	for dq.Next() {
		var k key
		var d string
		require.NoError(t, dq.Scan(&k.tenant, &k.artifact, &k.version, &d))
		digests[k] = d
	}
	require.NoError(t, dq.Err())

	got := map[key]string{}
	for _, tn := range b.tenants {
		for _, r := range readSilver(t, lake, tn) {
			k := key{r.TenantID, r.ArtifactID, r.Version}
			_, dup := got[k]
			require.Falsef(t, dup, "silver holds %v twice", k)
			got[k] = r.State
			sum := sha256.Sum256(r.Body)
			require.Equal(t, digests[k], hex.EncodeToString(sum[:]), "silver body of %v does not hash to the journalled digest", k)
			require.Equal(t, digests[k], r.CiphertextDigest)
		}
	}
	require.Equal(t, len(expect), len(got), "silver row count")
	for k, want := range expect {
		require.Equalf(t, want, got[k], "silver state of %v", k)
	}

	b.verifyGold(t, lake)
}

// writeKey stores the bundle's deployment key for a child process.
func writeKey(path string, b *bundle) error { return keys.WriteFile(path, b.key, keys.WriteOptions{}) }

func sortedInt64(s []int64) []int64 {
	out := append([]int64(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

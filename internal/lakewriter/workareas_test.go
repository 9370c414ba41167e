package lakewriter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/workload"
)

// wantWorkareas is what the claim fold (oml.claims, PostgreSQL's own state
// machine, not tables.GoldWorkareaRow.Apply) says tenant's gold.workareas
// must hold: per workarea, its ever-promoted claims counted by current
// state, their writers, the first promotion and the last change (time and
// seq), the number of changes the chain implies (journal.DeriveOutbox's
// gold.workareas rows) and the largest outbox seq of its live rows. It also
// returns the workareas a dead-lettered gold.workareas row touches (their
// row is then only required to exist).
func (b *bundle) wantWorkareas(t *testing.T, tn uuid.UUID) (map[string]tables.GoldWorkareaRow, map[string]bool) {
	t.Helper()
	ctx := context.Background()
	want := map[string]tables.GoldWorkareaRow{}
	q, err := b.pool.Query(ctx, `
SELECT workarea_id, count(*),
       count(*) FILTER (WHERE state = 'promoted'), count(*) FILTER (WHERE state = 'demoted'),
       count(*) FILTER (WHERE state = 'reassigned'), count(*) FILTER (WHERE state = 'simulation_ended'),
       count(*) FILTER (WHERE state = 'erased'), array_agg(DISTINCT writer ORDER BY writer),
       min(promoted_seq), (array_agg(promoted_at ORDER BY promoted_seq))[1],
       max(last_seq), (array_agg(updated_at ORDER BY last_seq DESC))[1]
  FROM oml.claims WHERE tenant_id = $1 AND promoted_seq IS NOT NULL GROUP BY workarea_id`, tn)
	require.NoError(t, err)
	for q.Next() {
		r := tables.GoldWorkareaRow{TenantID: tn.String()}
		require.NoError(t, q.Scan(&r.WorkareaID, &r.Claims, &r.Promoted, &r.Demoted, &r.Reassigned, &r.SimulationEnded, &r.Erased,
			&r.Writers, &r.FirstJournalSeq, &r.FirstChangedAt, &r.LastJournalSeq, &r.LastChangedAt))
		r.FirstChangedAt, r.LastChangedAt = r.FirstChangedAt.UTC(), r.LastChangedAt.UTC()
		want[r.WorkareaID] = r
	}
	require.NoError(t, q.Err())

	evs, err := journal.ReadChain(ctx, b.pool, tn)
	require.NoError(t, err)
	implied, err := journal.DeriveOutbox(tn, evs)
	require.NoError(t, err)
	for _, o := range implied {
		if o.Target != journal.TargetGoldWorkareas {
			continue
		}
		var p journal.LineagePayload
		require.NoError(t, json.Unmarshal(o.Payload, &p))
		r := want[p.WorkareaID]
		r.Changes++
		want[p.WorkareaID] = r
	}
	dead := map[string]bool{}
	oq, err := b.pool.Query(ctx, `
SELECT o.payload->>'workarea_id', o.seq, d.outbox_seq IS NOT NULL AND d.reenqueued_at IS NULL
  FROM oml.outbox o LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
 WHERE o.tenant_id = $1 AND o.target = 'gold.workareas' ORDER BY o.seq`, tn)
	require.NoError(t, err)
	for oq.Next() {
		var wa string
		var seq int64
		var isDead bool
		require.NoError(t, oq.Scan(&wa, &seq, &isDead))
		if isDead {
			dead[wa] = true
			continue
		}
		r := want[wa]
		r.LastOutboxSeq = max(r.LastOutboxSeq, seq)
		want[wa] = r
	}
	require.NoError(t, oq.Err())
	return want, dead
}

// verifyWorkareas checks that gold.workareas holds exactly one row per
// workarea with a promoted claim, equal to what the claim fold implies
// (wantWorkareas). Part of verifyGold, so of verifyLake: the crash, kill
// -9, outage and fork suites check it.
func (b *bundle) verifyWorkareas(t *testing.T, lake store.Store, tn uuid.UUID) {
	t.Helper()
	want, dead := b.wantWorkareas(t, tn)
	got := map[string]bool{}
	for _, r := range readTyped(t, lake, tn, tables.Workareas, tables.DecodeWorkarea) {
		require.Falsef(t, got[r.WorkareaID], "tenant %s: gold.workareas holds workarea %s more than once", tn, r.WorkareaID)
		got[r.WorkareaID] = true
		w, ok := want[r.WorkareaID]
		require.Truef(t, ok, "tenant %s: gold.workareas holds workarea %s, which has no promoted claim", tn, r.WorkareaID)
		if dead[r.WorkareaID] {
			continue
		}
		r.FirstChangedAt, r.LastChangedAt = r.FirstChangedAt.UTC(), r.LastChangedAt.UTC()
		require.Equalf(t, w, r, "tenant %s: gold.workareas row of %s", tn, r.WorkareaID)
	}
	for wa := range want {
		require.Truef(t, got[wa], "tenant %s: gold.workareas lacks workarea %s", tn, wa)
	}
}

// TestWorkareas_RandomLifecycles_IndependentReadOfEveryFileEqualsTheFold:
// a randomized workload of promotions, demotions, erasures, reassignments
// and simulation ends over a few workareas, drained in small batches (so
// rows are MERGEd into rows earlier batches wrote); then the live Parquet
// files of each tenant's gold/workareas are read straight from the store,
// one by one, and their rows equal what the claim fold implies, one row
// per workarea. The table's files that are not live are exactly those a
// MERGE removed (each removal is in the log), and no file holds a body.
func TestWorkareas_RandomLifecycles_IndependentReadOfEveryFileEqualsTheFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachSeed(t, "", "TestWorkareas_RandomLifecycles", func(t *testing.T, seed uint64) {
		b, res, lake := drainLifecycles(t, seed, 16)
		require.NotZero(t, res.Stats.Demoted)
		require.NotZero(t, res.Stats.Erased+res.Stats.Reassigned+res.Stats.SimEnded)

		states := map[string]bool{}
		merged := false
		for _, tn := range b.tenants {
			want, dead := b.wantWorkareas(t, tn)
			require.Empty(t, dead)
			require.NotEmpty(t, want)
			key := tables.TableKey{Tenant: tn, Kind: tables.Workareas}
			st, err := key.Store(lake)
			require.NoError(t, err)
			snap, err := delta.Load(ctx, st)
			require.NoError(t, err)
			removed := map[string]bool{}
			for v := int64(0); v <= snap.Version(); v++ {
				raw, err := st.Get(ctx, fmt.Sprintf("%s%020d.json", delta.LogDir, v))
				require.NoError(t, err)
				for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
					var a struct {
						Remove *struct {
							Path string `json:"path"`
						} `json:"remove"`
					}
					require.NoError(t, json.Unmarshal([]byte(line), &a))
					if a.Remove != nil {
						p, err := delta.DecodePath(a.Remove.Path)
						require.NoError(t, err)
						removed[p] = true
					}
				}
			}
			merged = merged || len(removed) > 0
			live := map[string]bool{}
			for _, f := range snap.Files() {
				p, err := delta.DecodePath(f.Path)
				require.NoError(t, err)
				live[p] = true
			}
			infos, err := st.List(ctx, "", "")
			require.NoError(t, err)
			var files []string
			for _, in := range infos {
				if !strings.HasSuffix(in.Key, ".parquet") || strings.HasPrefix(in.Key, delta.LogDir) {
					continue
				}
				files = append(files, in.Key)
				require.Truef(t, live[in.Key] != removed[in.Key], "file %s is either live or removed by a MERGE", in.Key)
			}
			got := map[string]tables.GoldWorkareaRow{}
			for _, f := range files {
				if !live[f] {
					continue
				}
				for _, r := range readParquetFileAs(t, st, f, tables.WorkareaColumns().Columns(),
					[]int{int(tables.WorkareaFirstChangedAt), int(tables.WorkareaLastChangedAt)}) {
					g := tables.DecodeWorkarea(r)
					_, dup := got[g.WorkareaID]
					require.Falsef(t, dup, "workarea %s has two rows", g.WorkareaID)
					got[g.WorkareaID] = g
				}
			}
			require.Equal(t, want, got)
			for _, g := range got {
				require.Equal(t, g.Claims, g.Promoted+g.Demoted+g.Reassigned+g.SimulationEnded+g.Erased)
				for s, n := range map[string]int64{"demoted": g.Demoted, "erased": g.Erased, "reassigned": g.Reassigned, "simulation_ended": g.SimulationEnded} {
					if n > 0 {
						states[s] = true
					}
				}
			}
			b.noBodyIn(t, lake, tn, files, st)
		}
		require.True(t, merged, "no batch MERGEd into an existing workarea row")
		require.True(t, states["demoted"] || states["erased"], "the workload left no retired claim")
	})
}

// readParquetFileAs is readParquetFile for a table with the given columns,
// the timestamp columns at positions ts.
func readParquetFileAs(t *testing.T, st store.Store, key string, cols []string, ts []int) []pq.Row {
	t.Helper()
	rows := readParquetRows(t, st, key, cols)
	for i := range rows {
		for _, c := range ts {
			if us, ok := rows[i][c].(int64); ok {
				rows[i][c] = time.UnixMicro(us).UTC()
			}
		}
	}
	return rows
}

// TestTrust_TamperedWorkareaRows_Poison: gold.workareas rows whose payload
// was edited behind the append path (another state before, another
// workarea, another writer) are poison: dead-lettered on the claim's chain
// and never counted in gold/workareas; every other change is counted once.
func TestTrust_TamperedWorkareaRows_Poison(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	tn := b.tenants[0]
	b.load(t, workload.Config{Claims: 30, Seed: 78, PromoteRatio: 0.6, RetractRatio: 0.8, FollowUpRatio: 0.5})
	real := b.tamper(t, tn, journal.TargetGoldWorkareas, journal.OpRetract, `jsonb_set(payload, '{state_before}', '"held"')`,
		`jsonb_set(payload, '{workarea_id}', '"wa-forged"')`, `jsonb_set(payload, '{writer}', '"mallory"')`)
	lake := store.NewMem()
	sum := b.drainInto(t, lake)
	require.Equal(t, sortedInt64(real), sortedInt64(sum.DeadLettered))
	for _, seq := range real {
		require.Equal(t, tn, b.deadLetterChain(t, seq), "dead-lettered on the claim's tenant chain")
	}
	for _, r := range readTyped(t, lake, tn, tables.Workareas, tables.DecodeWorkarea) {
		require.NotEqual(t, "wa-forged", r.WorkareaID)
		require.NotContains(t, r.Writers, "mallory")
	}
	b.verifyLake(t, lake)
}

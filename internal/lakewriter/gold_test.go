package lakewriter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/workload"
)

// lineageKey is one gold.lineage row's identity: one change (journal seq)
// to one claim.
type lineageKey struct {
	journalSeq int64
	artifact   string
	version    int32
}

// wantLineage is what the journal implies for tenant's gold.lineage: the
// fold's gold rows (journal.DeriveOutbox over the stored chain), with the
// event's type, hash and time, less the dead-lettered ones; and the outbox
// seq each was inserted at.
func (b *bundle) wantLineage(t *testing.T, tn uuid.UUID) map[lineageKey]tables.GoldLineageRow {
	t.Helper()
	ctx := context.Background()
	evs, err := journal.ReadChain(ctx, b.pool, tn)
	require.NoError(t, err)
	implied, err := journal.DeriveOutbox(tn, evs)
	require.NoError(t, err)
	var hashes = map[int64][]byte{}
	hq, err := b.pool.Query(ctx, `SELECT seq, hash FROM oml.journal WHERE tenant_id = $1`, tn)
	require.NoError(t, err)
	for hq.Next() {
		var s int64
		var h []byte
		require.NoError(t, hq.Scan(&s, &h))
		hashes[s] = h
	}
	require.NoError(t, hq.Err())
	outboxSeq := map[lineageKey]int64{}
	dead := map[lineageKey]bool{}
	oq, err := b.pool.Query(ctx, `SELECT o.seq, o.journal_seq, o.artifact_id, o.version, d.outbox_seq IS NOT NULL
FROM oml.outbox o LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
WHERE o.tenant_id = $1 AND o.target = 'gold.lineage' ORDER BY o.seq`, tn)
	require.NoError(t, err)
	for oq.Next() {
		var k lineageKey
		var seq int64
		var isDead bool
		require.NoError(t, oq.Scan(&seq, &k.journalSeq, &k.artifact, &k.version, &isDead))
		if isDead {
			dead[k] = true
			continue
		}
		// The live row of the change: the one not dead-lettered (a planted
		// copy is; so is the original of a re-enqueued dead letter, whose
		// copy is the live row).
		if _, ok := outboxSeq[k]; !ok {
			outboxSeq[k] = seq
		}
	}
	for k := range outboxSeq {
		delete(dead, k) // a change with a live row is expected
	}
	require.NoError(t, oq.Err())
	byEvent := map[int64]journal.ReplayEvent{}
	for _, e := range evs {
		byEvent[int64(e.Seq)] = e
	}
	want := map[lineageKey]tables.GoldLineageRow{}
	for _, r := range implied {
		if r.Target != journal.TargetGoldLineage {
			continue
		}
		k := lineageKey{r.JournalSeq, *r.ArtifactID, int32(*r.Version)}
		if dead[k] {
			continue
		}
		var p journal.LineagePayload
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		ev := byEvent[r.JournalSeq]
		want[k] = tables.GoldLineageRow{TenantID: tn.String(), ArtifactID: k.artifact, Version: k.version,
			JournalSeq: k.journalSeq, EventType: string(ev.Type), EventHash: hashes[k.journalSeq], RecordedAt: ev.RecordedAt.UTC(),
			Actor: p.Actor, Reason: p.Reason, StateBefore: p.StateBefore, StateAfter: p.StateAfter, WorkareaID: p.WorkareaID,
			ToWorkareaID: p.ToWorkareaID, Writer: p.Writer, Principal: p.Principal, Provenance: p.Provenance,
			PlaintextDigest: p.PlaintextDigest, CiphertextDigest: p.CiphertextDigest, SubmittedSeq: p.SubmittedSeq,
			PrevJournalSeq: p.PrevSeq, OutboxSeq: outboxSeq[k]}
	}
	return want
}

// verifyGold checks that gold.lineage holds every change the journal
// implies exactly once, each row equal to what the journal says (event
// hash, time, actor, states, attribution, digests, outbox seq). It is part
// of verifyLake, so the crash, kill -9, outage and fork suites check gold
// too.
func (b *bundle) verifyGold(t *testing.T, lake store.Store) {
	t.Helper()
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, b.tenants...) {
		want := b.wantLineage(t, tn)
		got := map[lineageKey]int{}
		for _, r := range readTyped(t, lake, tn, tables.Gold, tables.DecodeLineage) {
			k := lineageKey{r.JournalSeq, r.ArtifactID, r.Version}
			got[k]++
			require.Equalf(t, 1, got[k], "tenant %s: gold.lineage holds the change %v more than once", tn, k)
			w, ok := want[k]
			require.Truef(t, ok, "tenant %s: gold.lineage holds %v, which the journal does not imply", tn, k)
			r.RecordedAt = r.RecordedAt.UTC()
			require.Equalf(t, w, r, "tenant %s: gold.lineage row %v", tn, k)
		}
		for k := range want {
			require.Equalf(t, 1, got[k], "tenant %s: gold.lineage lacks the change %v", tn, k)
		}
		b.verifyWorkareas(t, lake, tn)
	}
}

// TestGold_RandomLifecycles_IndependentReadOfEveryFileMatchesTheJournal:
// a randomized workload of promotions, demotions, erasures, reassignments
// and simulation ends (several changes per claim), drained in small
// batches; then every Parquet file under each tenant's gold/lineage is read
// straight from the store (no Delta log: the files on storage must be the
// snapshot's live files, gold being append-only) and the rows equal what
// the journal implies, each change exactly once, and no file holds a body
// or anything of the held plaintext.
func TestGold_RandomLifecycles_IndependentReadOfEveryFileMatchesTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachSeed(t, "", "TestGold_RandomLifecycles", func(t *testing.T, seed uint64) {
		b, res, lake := drainLifecycles(t, seed, 15)
		require.NotZero(t, res.Stats.Demoted+res.Stats.Erased+res.Stats.Reassigned+res.Stats.SimEnded)

		kinds := map[string]bool{}
		multi := 0
		for _, tn := range b.tenants {
			want := b.wantLineage(t, tn)
			require.Equal(t, oracleLineage(t, b, tn), sortedKeys(want), "the fold's lineage rows are the changes to promoted claims")
			key := tables.TableKey{Tenant: tn, Kind: tables.Gold}
			st, err := key.Store(lake)
			require.NoError(t, err)
			infos, err := st.List(ctx, "", "")
			require.NoError(t, err)
			var files []string
			for _, in := range infos {
				if strings.HasSuffix(in.Key, ".parquet") && !strings.HasPrefix(in.Key, delta.LogDir) {
					files = append(files, in.Key)
				}
			}
			snap, err := delta.Load(ctx, st)
			require.NoError(t, err)
			var live []string
			for _, f := range snap.Files() {
				p, err := delta.DecodePath(f.Path)
				require.NoError(t, err)
				live = append(live, p)
			}
			sort.Strings(files)
			sort.Strings(live)
			require.Equal(t, live, files, "gold.lineage is append-only: its files on storage are its live files")

			got := map[lineageKey]int{}
			perClaim := map[[2]string]int{}
			for _, f := range files {
				for _, r := range readParquetFile(t, st, f) {
					g := tables.DecodeLineage(r)
					g.RecordedAt = g.RecordedAt.UTC()
					k := lineageKey{g.JournalSeq, g.ArtifactID, g.Version}
					got[k]++
					require.Equal(t, want[k], g, "file %s: row %v", f, k)
					kinds[g.EventType] = true
					perClaim[[2]string{g.ArtifactID, fmt.Sprint(g.Version)}]++
				}
			}
			require.Equal(t, len(want), len(got))
			for k := range want {
				require.Equalf(t, 1, got[k], "change %v", k)
			}
			for _, n := range perClaim {
				if n > 2 {
					multi++
				}
			}
			b.noBodyIn(t, lake, tn, files, st)
		}
		require.True(t, kinds[string(journal.TypeClaimPromoted)])
		require.NotZero(t, multi, "no claim has more than two changes: the workload did not exercise chained lineage")
	})
}

// readParquetFile reads every row of one gold.lineage Parquet file, all
// columns, in the file's order (the lake writer writes the schema's order).
func readParquetFile(t *testing.T, st store.Store, key string) []pq.Row {
	t.Helper()
	return readParquetFileAs(t, st, key, tables.LineageColumns().Columns(), []int{int(tables.LineageRecordedAt)})
}

// readParquetRows reads every row of one Parquet file straight from the
// store (no Delta log), requiring its columns to be cols, in order.
func readParquetRows(t *testing.T, st store.Store, key string, cols []string) []pq.Row {
	t.Helper()
	obj, err := st.Open(context.Background(), key)
	require.NoError(t, err)
	defer obj.Close()
	f, err := pq.Open(obj, obj.Size())
	require.NoError(t, err)
	var names []string
	for _, fl := range f.Schema().Fields {
		names = append(names, fl.Name)
	}
	require.Equal(t, cols, names, "file %s has the table's columns in order", key)
	rows, err := f.Rows()
	require.NoError(t, err)
	var out []pq.Row
	for {
		batch, err := rows.Next(1024)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		out = append(out, batch...)
	}
	return out
}

// noBodyIn: no held or promoted body (ciphertext) of the tenant appears in
// any gold file.
func (b *bundle) noBodyIn(t *testing.T, lake store.Store, tn uuid.UUID, files []string, st store.Store) {
	t.Helper()
	ctx := context.Background()
	var bodies [][]byte
	q, err := b.pool.Query(ctx, `SELECT ciphertext FROM oml.claim_bodies WHERE tenant_id = $1`, tn)
	require.NoError(t, err)
	for q.Next() {
		var c []byte
		require.NoError(t, q.Scan(&c))
		bodies = append(bodies, c)
	}
	require.NoError(t, q.Err())
	for _, r := range readSilver(t, lake, tn) {
		if r.Body != nil {
			bodies = append(bodies, r.Body)
		}
	}
	require.NotEmpty(t, bodies)
	for _, f := range files {
		raw, err := st.Get(ctx, f)
		require.NoError(t, err)
		for _, body := range bodies {
			require.False(t, bytes.Contains(raw, body[:32]), "gold file %s holds a claim body", f)
		}
	}
}

// TestTrust_ForgedOrTamperedLineageRows_Poison: gold.lineage rows the
// journal does not back are poison, dead-lettered and never in gold: a row
// planted by the application for the demotion of a claim that was never
// promoted (no lineage), and real lineage rows whose payload was edited
// behind the append path (another actor, another state before, another
// digest). Everything else reaches gold exactly once.
func TestTrust_ForgedOrTamperedLineageRows_Poison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tn := b.tenants[0]
	b.load(t, workload.Config{Claims: 30, Seed: 77, PromoteRatio: 0.6, RetractRatio: 0.8, FollowUpRatio: 0.5})
	// A held claim, demoted: the fold emits no lineage for it.
	var subSeq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT submitted_seq FROM oml.claims
WHERE tenant_id = $1 AND state = 'held' ORDER BY submitted_seq LIMIT 1`, tn).Scan(&subSeq))
	var art string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT artifact_id FROM oml.claims WHERE tenant_id = $1 AND submitted_seq = $2`, tn, subSeq).Scan(&art))
	_, err := chain.Append(ctx, b.pool, b.key, tn, journal.MustNew(journal.ClaimDemoted{ArtifactID: art, Version: 1, By: "carol"}))
	require.NoError(t, err)
	var demSeq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(seq) FROM oml.journal WHERE tenant_id = $1`, tn).Scan(&demSeq))
	ver := int32(1)
	p, _ := json.Marshal(journal.LineagePayload{Actor: "carol", StateBefore: journal.StatePromoted, StateAfter: journal.StateDemoted,
		WorkareaID: "wa-0", Writer: "w", Principal: "p", Provenance: "human", PlaintextDigest: "00", CiphertextDigest: "00",
		SubmittedSeq: subSeq, PrevSeq: subSeq})
	forged := b.plant(t, forgedRow{tenant: tn, journalSeq: demSeq, target: journal.TargetGoldLineage, op: journal.OpRetract,
		artifact: &art, version: &ver, payload: string(p)})

	real := b.tamper(t, tn, journal.TargetGoldLineage, journal.OpRetract, `jsonb_set(payload, '{actor}', '"mallory"')`,
		`jsonb_set(payload, '{state_before}', '"held"')`, `jsonb_set(payload, '{plaintext_digest}', '"00"')`)

	lake := store.NewMem()
	sum := b.drainInto(t, lake)
	require.Equal(t, sortedInt64(append([]int64{forged}, real...)), sortedInt64(sum.DeadLettered))
	for _, seq := range append([]int64{forged}, real...) {
		require.Equal(t, tn, b.deadLetterChain(t, seq), "dead-lettered on the claim's tenant chain")
	}
	for _, r := range readTyped(t, lake, tn, tables.Gold, tables.DecodeLineage) {
		require.NotEqual(t, "mallory", r.Actor)
		require.False(t, r.JournalSeq == demSeq && r.ArtifactID == art, "the forged lineage row is in gold")
	}
	b.verifyLake(t, lake)
	b.requireChainsClean(t, tn)
}

// oracleLineage is the set of lineage changes of tenant's chain, computed
// from the events alone with a state machine of its own (not the fold's):
// a promotion, and every later change to a promoted claim, one per claim.
func oracleLineage(t *testing.T, b *bundle, tn uuid.UUID) []lineageKey {
	t.Helper()
	evs, err := journal.ReadChain(context.Background(), b.pool, tn)
	require.NoError(t, err)
	type claim struct {
		a string
		v int
	}
	promoted, erased := map[claim]bool{}, map[claim]bool{}
	versions := map[string][]int{}
	var out []lineageKey
	add := func(seq uint64, c claim) {
		if promoted[c] && !erased[c] {
			out = append(out, lineageKey{int64(seq), c.a, int32(c.v)})
		}
	}
	for _, e := range evs {
		p, err := journal.Decode(e.Type, e.Payload)
		require.NoError(t, err)
		switch x := p.(type) {
		case journal.ClaimSubmitted:
			versions[x.ArtifactID] = append(versions[x.ArtifactID], x.Version)
		case journal.ClaimPromoted:
			promoted[claim{x.ArtifactID, x.Version}] = true
			add(e.Seq, claim{x.ArtifactID, x.Version})
		case journal.ClaimDemoted:
			add(e.Seq, claim{x.ArtifactID, x.Version})
		case journal.ClaimReassigned:
			add(e.Seq, claim{x.ArtifactID, x.Version})
		case journal.SimulationEnded:
			for _, r := range x.Claims {
				add(e.Seq, claim{r.ArtifactID, r.Version})
			}
		case journal.ClaimErased:
			for _, v := range versions[x.ArtifactID] {
				add(e.Seq, claim{x.ArtifactID, v})
				erased[claim{x.ArtifactID, v}] = true
			}
		}
	}
	return sortKeys(out)
}

func sortedKeys(m map[lineageKey]tables.GoldLineageRow) []lineageKey {
	out := make([]lineageKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return sortKeys(out)
}

func sortKeys(ks []lineageKey) []lineageKey {
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.journalSeq != b.journalSeq {
			return a.journalSeq < b.journalSeq
		}
		if a.artifact != b.artifact {
			return a.artifact < b.artifact
		}
		return a.version < b.version
	})
	return ks
}

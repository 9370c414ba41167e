package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit"
)

var (
	benchClaims   = flag.Int("reconcile.claims", 5000, "claims in BenchmarkReconcile (1000000 for the measured run)")
	benchBodySize = flag.Int("reconcile.body", 256, "ciphertext bytes per claim in BenchmarkReconcile")
	benchPerFile  = flag.Int("reconcile.perfile", 10000, "rows per generated data file (the lake writer's default batch is 10,000 rows)")
)

// BenchmarkReconcile measures oml reconcile on one tenant with
// -reconcile.claims claims (90% promoted, so in silver, gold.lineage and
// gold.workareas; the rest demoted while held) and two journal events per
// claim (so 2N bronze rows), built directly — journal events from the
// journal package's constructors, folded by journal.Replay and COPYed into
// PostgreSQL, bulk Parquet files into the lake (file store) with the lake
// writer's txn action — because the append path would take hours at a
// million (setupBench). Each run must report the content clean and have
// compared all four tables row for row (checkBenchSummary), so a figure is
// never that of a run that found, or skipped, something. Reported: seconds
// per run, claims/s, and the peak Go heap in use sampled every 10ms during
// the run (the bound the package doc describes), besides ns/op.
//
//	go test -run '^$' -bench BenchmarkReconcile -benchtime 1x ./internal/reconcile/ -reconcile.claims=1000000
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	n := *benchClaims
	bb := setupBench(b, n, *benchBodySize)
	for _, skip := range []bool{false, true} {
		name := "bodies"
		if skip {
			name = "skip-bodies"
		}
		b.Run(name, func(b *testing.B) {
			var peak atomic.Uint64
			var rss int64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				resetPeakRSS()
				stop := sampleHeap(&peak)
				rep, err := reconcile.Run(ctx, bb.pool, bb.lake, reconcile.Options{Tenant: &bb.tenant, StaleAfter: -1, SkipBodies: skip, TempDir: b.TempDir()})
				stop()
				rss = max(rss, peakRSS())
				require.NoError(b, err)
				if !rep.OK {
					for _, f := range rep.Findings[:min(10, len(rep.Findings))] {
						b.Logf("%s %s v%d seq %d: %s", f.Class, f.ArtifactID, f.Version, f.Seq, f.Detail)
					}
					b.Fatalf("the generated lake should reconcile clean: %v", rep.Counts)
				}
				require.EqualValues(b, n+1, rep.Stats.Claims)
				checkBenchSummary(b, bb, rep)
				b.ReportMetric(rep.Stats.ElapsedSeconds, "s/run")
				b.ReportMetric(float64(n)/rep.Stats.ElapsedSeconds, "claims/s")
				b.ReportMetric(float64(rep.Stats.SortRuns), "sort-runs")
			}
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			if rss > 0 {
				b.ReportMetric(float64(rss)/(1<<10), "peak-RSS-MiB")
			}
		})
	}
}

// checkBenchSummary fails the benchmark unless the run compared every
// table row for row: a clean report is only worth its time if bronze,
// silver, gold.lineage and gold.workareas were each read whole and matched
// against the fold, not skipped (an absent table, a cutoff below the
// generated rows).
func checkBenchSummary(b *testing.B, bb *bench, rep *reconcile.Report) {
	b.Helper()
	require.Len(b, rep.Tenants, 1)
	sums := rep.Tenants[0].Tables
	require.Len(b, sums, len(tables.Kinds))
	for i, kind := range tables.Kinds {
		s, want := sums[i], bb.want[kind]
		require.True(b, s.Exists, "%s: no table", s.Table)
		require.Equal(b, want, [2]int64{s.FoldRows, s.LakeRows}, "%s: fold rows compared and lake rows read", s.Table)
		require.EqualValues(b, rep.Frontier, s.Cutoff, "%s: compared at the frontier", s.Table)
	}
}

// resetPeakRSS resets the kernel's high-water mark of this process's
// resident set (Linux 4.0+: writing 5 to clear_refs), so peakRSS measures
// the run and not the generation before it. Elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in KiB (0 when unknown).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

type bench struct {
	pool   *pgxpool.Pool
	lake   store.Store
	tenant uuid.UUID
	// want is each table's comparison on clean content, by kind: the fold
	// rows compared (journal events, claims, implied lineage rows,
	// workareas) and the lake rows read.
	want map[tables.Kind][2]int64
}

// benchClaim is generated claim i: every attribute is a function of i, so
// the events, the fold's rows and the lake's rows can each be built on
// their own and still agree.
type benchClaim struct {
	artifact, workarea, writer string
	plain, cipher              [32]byte
	body                       []byte
	promoted                   bool // every tenth is demoted while held instead
}

func newBenchClaim(i, bodySize int) benchClaim {
	c := benchClaim{artifact: fmt.Sprintf("art-%08d", i), workarea: fmt.Sprintf("wa-%d", i%8), writer: fmt.Sprintf("agent-%d", i%20),
		promoted: i%10 != 9}
	c.plain = sha256.Sum256([]byte("plain-" + c.artifact))
	c.body = benchBody(c.artifact, bodySize)
	c.cipher = sha256.Sum256(c.body)
	return c
}

// benchBody is the ciphertext stand-in of an artifact (bodySize bytes).
func benchBody(artifact string, bodySize int) []byte {
	body := make([]byte, bodySize)
	seed := sha256.Sum256([]byte(artifact))
	for j := 0; j < bodySize; j += 32 {
		copy(body[j:], seed[:])
		binary.BigEndian.PutUint32(body[j:], uint32(j))
	}
	return body
}

// events are the claim's two journal events, built by the journal
// package's constructors: its submission and its promotion or demotion.
func (c benchClaim) events(dataKey []byte) (journal.Event, journal.Event, error) {
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: c.artifact, Version: 1, WorkareaID: c.workarea,
		Writer: c.writer, Principal: "principal-1", Provenance: "human",
		PlaintextDigest: hex.EncodeToString(c.plain[:]), CiphertextDigest: hex.EncodeToString(c.cipher[:])}, c.body, dataKey)
	if err != nil {
		return journal.Event{}, journal.Event{}, err
	}
	var next journal.Payload = journal.ClaimPromoted{ArtifactID: c.artifact, Version: 1, By: "reviewer-1"}
	if !c.promoted {
		next = journal.ClaimDemoted{ArtifactID: c.artifact, Version: 1, By: "reviewer-1", Reason: "bench"}
	}
	ev, err := journal.New(next)
	return sub, ev, err
}

// setupBench builds the tenant: one real promoted claim appended and
// drained by the real lake writer (so the tables exist with the lake
// writer's schema), then n generated claims. Claim i is submitted at
// journal seq base+2i and, at base+2i+1, promoted (nine in ten) or
// demoted while held (every tenth: never in silver or gold). The events
// are the journal package's (constructors, strict payloads); journal.Replay
// — the fold the append path runs — derives oml.claims and oml.outbox from
// the chain; the lake's files are written from those outbox rows and their
// events the way the lake writer builds rows (bronze from the event, silver
// from a materialize payload and the body, gold.lineage from a lineage
// payload and its event, gold.workareas as each workarea's sum of changes).
// Only the hashes and signatures are filler: the database's chain check
// (migration 004) is off for the generated events.
func setupBench(b *testing.B, n, bodySize int) *bench {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	pool := testdb.New(b).Pool(b)
	k, err := keys.Generate()
	require.NoError(b, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(b, err)
	tn, _, err := tenant.Create(ctx, pool, k, "bench")
	require.NoError(b, err)
	lake := testkit.FileLake(b)

	body := []byte("real-body")
	sum := sha256.Sum256(body)
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: "real-1", Version: 1, WorkareaID: "wa", Writer: "w",
		Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]), CiphertextDigest: hex.EncodeToString(sum[:])},
		body, make([]byte, 32))
	require.NoError(b, err)
	_, err = chain.Append(ctx, pool, k, tn.ID, sub, journal.MustNew(journal.ClaimPromoted{ArtifactID: "real-1", Version: 1, By: "r"}))
	require.NoError(b, err)
	d, err := lakewriter.New(lakewriter.Options{DB: pool, Lake: lake, Signer: k, NoLease: true, HorizonTimeout: 20 * time.Second})
	require.NoError(b, err)
	_, err = d.DrainOnce(ctx)
	require.NoError(b, err)

	var head int64
	var headHash []byte
	require.NoError(b, pool.QueryRow(ctx, `SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, tn.ID).Scan(&head, &headHash))
	base := head + 1
	last := base + 2*int64(n) - 1
	now := time.Now().UTC().Truncate(time.Microsecond)

	// The journal: 2n events.
	_, err = pool.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER journal_extends_chain`)
	require.NoError(b, err)
	dataKey := make([]byte, 32)
	prev := headHash
	var pending []journal.Event
	seq := base
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"oml", "journal"},
		[]string{"tenant_id", "seq", "prev_hash", "hash", "signature", "key_id", "event_type", "payload", "recorded_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if len(pending) == 0 {
				i := int(seq-base) / 2
				if i >= n {
					return nil, nil
				}
				s, next, err := newBenchClaim(i, bodySize).events(dataKey)
				if err != nil {
					return nil, err
				}
				pending = []journal.Event{s, next}
			}
			ev := pending[0]
			pending = pending[1:]
			h := sha256.Sum256(append(append([]byte(nil), prev...), ev.Payload...))
			row := []any{tn.ID, seq, prev, h[:], make([]byte, 64), k.KeyID(), string(ev.Type), ev.Payload, now}
			prev = h[:]
			seq++
			return row, nil
		}))
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `UPDATE oml.chain_heads SET seq = $2, hash = $3 WHERE tenant_id = $1`, tn.ID, last, prev)
	require.NoError(b, err)

	// The fold's claims and outbox rows, as the append path would have
	// written them.
	evs, err := journal.ReadChain(ctx, pool, tn.ID)
	require.NoError(b, err)
	folded, outRows, err := journal.Replay(tn.ID, evs)
	require.NoError(b, err)
	evs = nil
	var claims []*journal.Claim
	for _, c := range folded {
		if c.SubmittedSeq >= base {
			claims = append(claims, c)
		}
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].SubmittedSeq < claims[j].SubmittedSeq })
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"oml", "claims"},
		[]string{"tenant_id", "artifact_id", "version", "workarea_id", "writer", "principal", "provenance", "plaintext_digest",
			"ciphertext_digest", "state", "submitted_seq", "submitted_at", "promoted_by", "promoted_seq", "promoted_at", "updated_at", "last_seq"},
		pgx.CopyFromSlice(len(claims), func(i int) ([]any, error) {
			c := claims[i]
			return []any{tn.ID, c.ArtifactID, c.Version, c.WorkareaID, c.Writer, c.Principal, c.Provenance, c.PlaintextDigest,
				c.CiphertextDigest, c.State, c.SubmittedSeq, c.SubmittedAt, c.PromotedBy, c.PromotedSeq, c.PromotedAt, c.UpdatedAt, c.LastSeq}, nil
		}))
	require.NoError(b, err)
	promoted := 0
	for _, c := range claims {
		if c.PromotedSeq != nil {
			promoted++
		}
	}
	claims, folded = nil, nil
	var genRows []journal.OutboxRow
	for _, o := range outRows {
		if o.JournalSeq >= base {
			genRows = append(genRows, o)
		}
	}
	outRows = nil
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"oml", "outbox"},
		[]string{"tenant_id", "journal_seq", "target", "op", "artifact_id", "version", "payload"},
		pgx.CopyFromSlice(len(genRows), func(i int) ([]any, error) {
			o := genRows[i]
			return []any{o.TenantID, o.JournalSeq, o.Target, o.Op, o.ArtifactID, o.Version, string(o.Payload)}, nil
		}))
	require.NoError(b, err)
	genRows = nil
	var frontier int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT max(seq) FROM oml.outbox`).Scan(&frontier))
	_, err = pool.Exec(ctx, `UPDATE oml.lake_frontier SET frontier = $1, batch_end = $1`, frontier)
	require.NoError(b, err)

	// The lake: each outbox row and its event, made into the row the lake
	// writer would write, in files of -reconcile.perfile rows, one commit
	// per table at the frontier.
	lakeRows := writeBenchLake(b, pool, lake, tn.ID, base, frontier, bodySize)
	_, err = pool.Exec(ctx, `ANALYZE oml.claims; ANALYZE oml.journal; ANALYZE oml.outbox`)
	require.NoError(b, err)
	// Clean content: one lake row per fold row, the real claim's included
	// (one event more than the generated ones at seq 1..head, one claim,
	// one lineage row, workarea "wa").
	p := int64(promoted) + 1
	want := map[tables.Kind][2]int64{
		tables.Bronze: {last, last}, tables.Silver: {int64(n) + 1, p}, tables.Gold: {p, p},
		tables.Workareas: {lakeRows[tables.Workareas] + 1, lakeRows[tables.Workareas] + 1},
	}
	b.Logf("generated %d claims (%d promoted), %d journal events, outbox up to %d, lake rows %v in %s",
		n, promoted, last, frontier, lakeRows, time.Since(start).Round(time.Second))
	b.ResetTimer()
	return &bench{pool: pool, lake: lake, tenant: tn.ID, want: want}
}

// benchTable buffers one table's generated rows into files of perFile
// rows and commits them once, at the frontier, as one batch would.
type benchTable struct {
	w     *delta.Writer
	adds  []*delta.Add
	rows  []pq.Row
	total int64
}

func (t *benchTable) add(ctx context.Context, b *testing.B, r pq.Row) {
	t.rows = append(t.rows, r)
	t.total++
	if len(t.rows) == *benchPerFile {
		t.flush(ctx, b)
	}
}

func (t *benchTable) flush(ctx context.Context, b *testing.B) {
	if len(t.rows) == 0 {
		return
	}
	add, err := t.w.WriteFile(ctx, map[string]*string{}, t.rows)
	require.NoError(b, err)
	t.adds = append(t.adds, add)
	t.rows = t.rows[:0]
}

// writeBenchLake writes the generated outbox rows (journal seq ≥ base) of
// tenant tn into its four tables and returns the rows written per table.
func writeBenchLake(b *testing.B, pool *pgxpool.Pool, lake store.Store, tn uuid.UUID, base, frontier int64, bodySize int) map[tables.Kind]int64 {
	ctx := context.Background()
	tbls := map[tables.Kind]*benchTable{}
	for _, kind := range tables.Kinds {
		st, err := tables.TableKey{Tenant: tn, Kind: kind}.Store(lake)
		require.NoError(b, err)
		w, err := delta.OpenWriter(ctx, st, delta.Options{})
		require.NoError(b, err)
		tbls[kind] = &benchTable{w: w}
	}
	areas := map[string]*tables.GoldWorkareaRow{}
	rows, err := pool.Query(ctx, `
SELECT o.seq, o.target, o.op, o.artifact_id, o.version, o.payload::text,
       j.seq, j.event_type, j.recorded_at, j.prev_hash, j.hash, j.signature, j.key_id, j.payload
  FROM oml.outbox o JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
 WHERE o.tenant_id = $1 AND o.journal_seq >= $2 ORDER BY o.seq`, tn, base)
	require.NoError(b, err)
	defer rows.Close()
	tenantID := tn.String()
	for rows.Next() {
		var (
			outboxSeq, seq            int64
			target, op, payload       string
			artifact                  *string
			version                   *int32
			et, kid                   string
			at                        time.Time
			prevHash, hash, sig, evPl []byte
		)
		require.NoError(b, rows.Scan(&outboxSeq, &target, &op, &artifact, &version, &payload, &seq, &et, &at, &prevHash, &hash, &sig, &kid, &evPl))
		at = at.UTC()
		kind, err := tables.ParseTarget(target)
		require.NoError(b, err)
		switch kind {
		case tables.Bronze:
			tbls[kind].add(ctx, b, tables.BronzeRow{TenantID: tenantID, Seq: seq, EventType: et, RecordedAt: at, PrevHash: prevHash,
				Hash: hash, Signature: sig, KeyID: kid, Payload: string(evPl), OutboxSeq: outboxSeq}.Row())
		case tables.Silver:
			var p journal.MaterializePayload
			require.Equal(b, journal.OpMaterialize, op, "the generated claims are only promoted")
			require.NoError(b, json.Unmarshal([]byte(payload), &p))
			tbls[kind].add(ctx, b, tables.SilverRow{ArtifactID: *artifact, Version: *version, TenantID: tenantID,
				WorkareaID: p.WorkareaID, Writer: p.Writer, Principal: p.Principal, Provenance: p.Provenance,
				PlaintextDigest: p.PlaintextDigest, CiphertextDigest: p.CiphertextDigest, Body: benchBody(*artifact, bodySize),
				State: p.State, PromotedBy: p.PromotedBy, SubmittedSeq: p.SubmittedSeq, PromotedSeq: p.PromotedSeq,
				JournalSeq: seq, OutboxSeq: outboxSeq, UpdatedAt: at}.Row())
		case tables.Gold, tables.Workareas:
			var p journal.LineagePayload
			require.NoError(b, json.Unmarshal([]byte(payload), &p))
			if kind == tables.Workareas {
				a := areas[p.WorkareaID]
				if a == nil {
					a = &tables.GoldWorkareaRow{TenantID: tenantID, WorkareaID: p.WorkareaID}
					areas[p.WorkareaID] = a
				}
				a.Apply(tables.WorkareaChange{StateBefore: p.StateBefore, StateAfter: p.StateAfter, Writer: p.Writer,
					JournalSeq: seq, RecordedAt: at, OutboxSeq: outboxSeq})
				continue
			}
			tbls[kind].add(ctx, b, tables.GoldLineageRow{TenantID: tenantID, ArtifactID: *artifact, Version: *version,
				JournalSeq: seq, EventType: et, EventHash: hash, RecordedAt: at, Actor: p.Actor, Reason: p.Reason,
				StateBefore: p.StateBefore, StateAfter: p.StateAfter, WorkareaID: p.WorkareaID, ToWorkareaID: p.ToWorkareaID,
				Writer: p.Writer, Principal: p.Principal, Provenance: p.Provenance, PlaintextDigest: p.PlaintextDigest,
				CiphertextDigest: p.CiphertextDigest, SubmittedSeq: p.SubmittedSeq, PrevJournalSeq: p.PrevSeq, OutboxSeq: outboxSeq}.Row())
		}
	}
	require.NoError(b, rows.Err())
	names := make([]string, 0, len(areas))
	for wa := range areas {
		names = append(names, wa)
	}
	sort.Strings(names)
	for _, wa := range names {
		tbls[tables.Workareas].add(ctx, b, areas[wa].Row())
	}
	out := map[tables.Kind]int64{}
	for _, kind := range tables.Kinds {
		t := tbls[kind]
		t.flush(ctx, b)
		_, err := t.w.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: t.adds, Txn: &delta.Txn{AppID: tables.AppID, Version: frontier}})
		require.NoError(b, err)
		out[kind] = t.total
	}
	return out
}

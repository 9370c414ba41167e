package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/tenant"
)

// Class names a kind of finding (docs/reconcile.md).
type Class string

// The finding classes.
const (
	MissingInLake    Class = "missing-in-lake"
	UnexpectedInLake Class = "unexpected-in-lake"
	DigestMismatch   Class = "digest-mismatch"
	StateMismatch    Class = "state-mismatch"
	DuplicateInLake  Class = "duplicate-in-lake"
	DeadLettered     Class = "dead-lettered"
	StaleFrontier    Class = "stale-frontier"
	ErasedKeyPresent Class = "erased-key-present"
	// AcceptedGap is not a problem: a dead letter that was abandoned
	// (deadletter.abandoned) — a row the journal says will never reach the
	// lake. It is listed in Report.Accepted, never counted as a finding.
	AcceptedGap Class = "accepted-gap"
	// CorruptFile: a table's Delta log (a commit or a checkpoint) or one of
	// its data files cannot be read as what it claims to be. The lake's
	// fault: a finding, never a reason not to audit the rest.
	CorruptFile Class = "corrupt-file"
)

// Classes lists every class in report order.
var Classes = []Class{MissingInLake, UnexpectedInLake, DigestMismatch, StateMismatch, DuplicateInLake,
	DeadLettered, StaleFrontier, ErasedKeyPresent, CorruptFile}

// Finding is one discrepancy, with the evidence to confirm it.
type Finding struct {
	Class      Class             `json:"class"`
	Tenant     uuid.UUID         `json:"tenant_id"`
	TenantName string            `json:"tenant"`
	Table      string            `json:"table,omitempty"`       // bronze.events | silver.claims | gold.lineage | gold.workareas | ""
	Workarea   string            `json:"workarea_id,omitempty"` // gold.workareas: the row's workarea
	ArtifactID string            `json:"artifact_id,omitempty"`
	Version    int32             `json:"version,omitempty"`
	Seq        int64             `json:"seq,omitempty"`        // journal seq
	OutboxSeq  int64             `json:"outbox_seq,omitempty"` // outbox seq, when known
	Detail     string            `json:"detail"`
	Evidence   map[string]string `json:"evidence,omitempty"`
}

// Options tune a run.
type Options struct {
	// Tenant restricts the audit to one tenant (nil: every tenant,
	// including the provider tenant's bronze table).
	Tenant *uuid.UUID
	// StaleAfter is the frontier lag (age of the oldest row not yet in the
	// lake) beyond which stale-frontier is reported. 0 means 5 minutes;
	// negative disables the check.
	StaleAfter time.Duration
	// SkipBodies does not read or hash silver bodies (the ciphertext bytes
	// are then not checked against the journalled digest; the digest
	// columns still are).
	SkipBodies bool
	// MaxFindings is how many findings of each class the report keeps
	// (0: 1000). Counts are always complete.
	MaxFindings int
	// RunBytes bounds the external sort's in-memory buffer (0: 32 MiB).
	RunBytes int
	// TempDir holds the sort runs (empty: os.TempDir()).
	TempDir string
	// Progress, when set, is updated as rows are compared.
	Progress *Progress
	// OnFinding, when set, is called with every finding, including those
	// beyond MaxFindings (`oml lake repair` needs the complete set, one
	// finding at a time, without the report holding them all).
	OnFinding func(Finding)
}

// Progress counts the journal events and claims compared so far, out of
// Total (known after the run starts), the lake rows read (each tenant's
// tables are read and sorted before its comparison starts), and tenants.
type Progress struct {
	Done        atomic.Int64
	Total       atomic.Int64
	LakeRows    atomic.Int64
	Tenants     atomic.Int64
	TenantsDone atomic.Int64
}

// TableSummary says what was compared for one table.
type TableSummary struct {
	Table string `json:"table"` // <tenant>/bronze/events
	// Exists is false when the table has no Delta log yet.
	Exists bool `json:"exists"`
	// Version and TxnVersion are the Delta version read and the lake
	// writer's txn version in it (-1: none).
	Version    int64 `json:"version"`
	TxnVersion int64 `json:"txn_version"`
	// Cutoff is the outbox seq the table is compared at (max of the
	// frontier and the txn version). JournalCutoff is the last journal seq
	// of the tenant all of whose rows for this table are at or below it:
	// their effects must be in the table. JournalSeen is the largest journal
	// seq with any row for this table at or below it: an event between the
	// two may be partly applied (one event can have several rows, and a
	// batch may end between them), so it is neither expected nor
	// unexpected; anything beyond JournalSeen is unexpected.
	Cutoff        int64 `json:"cutoff_outbox_seq"`
	JournalCutoff int64 `json:"cutoff_journal_seq"`
	JournalSeen   int64 `json:"seen_journal_seq"`
	LakeRows      int64 `json:"lake_rows"`
	FoldRows      int64 `json:"fold_rows"` // journal events (bronze) or claims (silver) compared
	Files         int   `json:"files"`
}

// TenantSummary is one tenant's part of the run.
type TenantSummary struct {
	Tenant uuid.UUID      `json:"tenant_id"`
	Name   string         `json:"tenant"`
	Tables []TableSummary `json:"tables"`
}

// Stats describe the run's cost.
type Stats struct {
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	LakeRows       int64   `json:"lake_rows"`
	Events         int64   `json:"events"`
	Claims         int64   `json:"claims"`
	SortRuns       int     `json:"sort_runs"`       // spilled runs, all tables
	PeakSortBytes  int     `json:"peak_sort_bytes"` // largest in-memory sort buffer
}

// Report is the result of a run.
type Report struct {
	OK       bool            `json:"ok"`
	Frontier int64           `json:"frontier"`
	Tenants  []TenantSummary `json:"tenants"`
	Counts   map[Class]int64 `json:"counts"`
	Findings []Finding       `json:"findings"`
	// Accepted are the known, journalled gaps (abandoned dead letters):
	// listed, not failures.
	Accepted  []Finding `json:"accepted"`
	Truncated bool      `json:"truncated"` // some findings were counted but not kept
	Stats     Stats     `json:"stats"`
}

// Total is the number of findings of every class.
func (r *Report) Total() int64 {
	var n int64
	for _, c := range r.Counts {
		n += c
	}
	return n
}

type runner struct {
	pool  *pgxpool.Pool
	lake  store.Store
	opts  Options
	rep   *Report
	kept  map[Class]int
	names map[uuid.UUID]string
	// held: tenants whose chain disagrees with its witnessed head. The lake
	// writer does not materialize them, so their tables are compared at
	// their own txn version, not the frontier.
	held map[uuid.UUID]*chainverify.Finding
}

func (r *runner) add(f Finding) {
	r.rep.Counts[f.Class]++
	if r.opts.OnFinding != nil {
		g := f
		if g.TenantName == "" {
			g.TenantName = r.names[g.Tenant]
		}
		r.opts.OnFinding(g)
	}
	if r.kept[f.Class] >= r.opts.MaxFindings {
		r.rep.Truncated = true
		return
	}
	r.kept[f.Class]++
	if f.TenantName == "" {
		f.TenantName = r.names[f.Tenant]
	}
	r.rep.Findings = append(r.rep.Findings, f)
}

// Run audits the lake against the journal fold (package doc).
func Run(ctx context.Context, pool *pgxpool.Pool, lake store.Store, opts Options) (*Report, error) {
	start := time.Now()
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 5 * time.Minute
	}
	if opts.MaxFindings <= 0 {
		opts.MaxFindings = 1000
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	rep := &Report{Counts: map[Class]int64{}, Findings: []Finding{}, Accepted: []Finding{}, Tenants: []TenantSummary{}}
	for _, c := range Classes {
		rep.Counts[c] = 0
	}
	r := &runner{pool: pool, lake: lake, opts: opts, rep: rep, kept: map[Class]int{}, names: map[uuid.UUID]string{}}

	refs, err := tenant.Refs(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	var tenants []tenant.Ref
	for _, t := range refs {
		if opts.Tenant == nil || t.ID == *opts.Tenant {
			tenants = append(tenants, t)
			r.names[t.ID] = t.Name
		}
	}
	var events, claims int64
	if err := pool.QueryRow(ctx, `
SELECT (SELECT coalesce(sum(seq), 0) FROM oml.chain_heads WHERE $1::uuid IS NULL OR tenant_id = $1)::bigint,
       (SELECT count(*) FROM oml.claims WHERE $1::uuid IS NULL OR tenant_id = $1)`, opts.Tenant).Scan(&events, &claims); err != nil {
		return nil, fmt.Errorf("reconcile: count the work: %w", err)
	}
	opts.Progress.Total.Store(events + claims)
	opts.Progress.Tenants.Store(int64(len(tenants)))

	if opts.StaleAfter > 0 {
		if err := r.staleFrontier(ctx); err != nil {
			return nil, err
		}
	}
	fc, err := chainverify.ForkCheck(ctx, pool, lake, opts.Tenant)
	if err != nil {
		return nil, fmt.Errorf("reconcile: fork check against the witnessed heads: %w", err)
	}
	r.held = map[uuid.UUID]*chainverify.Finding{}
	for i := range fc.Findings {
		r.held[fc.Findings[i].Tenant] = &fc.Findings[i]
	}
	for _, t := range tenants {
		if err := r.tenant(ctx, t.ID, t.Name); err != nil {
			return nil, err
		}
		opts.Progress.TenantsDone.Add(1)
	}
	fr, err := outbox.ReadFrontier(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	rep.Frontier = fr.Seq
	rep.OK = rep.Total() == 0
	rep.Stats.ElapsedSeconds = time.Since(start).Seconds()
	return rep, nil
}

func (r *runner) staleFrontier(ctx context.Context) error {
	st, err := lakewriter.ReadStatus(ctx, r.pool, lakewriter.StatusOptions{})
	if err != nil {
		return fmt.Errorf("reconcile: read the lake writer's status: %w", err)
	}
	lag := time.Duration(st.LagSeconds * float64(time.Second))
	if st.OldestUnapplied == nil || lag <= r.opts.StaleAfter {
		return nil
	}
	f := Finding{Class: StaleFrontier, TenantName: "-",
		Detail: fmt.Sprintf("the frontier (outbox seq %d) lags: the oldest row not in the lake is %s old (threshold %s), %d rows behind",
			st.Frontier, lag.Round(time.Second), r.opts.StaleAfter, st.BacklogRows),
		Evidence: map[string]string{
			"frontier": fmt.Sprint(st.Frontier), "oldest_unapplied_at": st.OldestUnapplied.UTC().Format(time.RFC3339),
			"backlog_rows": fmt.Sprint(st.BacklogRows), "last_seq": fmt.Sprint(st.LastSeq),
			"lease_live": fmt.Sprint(st.LeaseLive),
		}}
	if len(st.Blockers) > 0 {
		b := st.Blockers[0]
		f.Detail += fmt.Sprintf("; blocked by transaction xid %d (pid %d, %s@%s, %s, open since %s)",
			b.Xid, b.PID, b.User, b.Database, b.State, b.XactStart.UTC().Format(time.RFC3339))
		f.Evidence["blocker_pid"] = fmt.Sprint(b.PID)
		f.Evidence["blocker_xid"] = fmt.Sprint(b.Xid)
		f.Evidence["blocker_kind"] = b.Kind
		f.Evidence["blocker_xact_start"] = b.XactStart.UTC().Format(time.RFC3339)
		if b.Query != "" {
			f.Evidence["blocker_query"] = b.Query
		}
		if b.GID != "" {
			f.Evidence["blocker_gid"] = b.GID
		}
	} else if !st.LeaseLive {
		f.Detail += "; no lake writer holds a live lease (is oml lake drain running?)"
	}
	r.add(f)
	return nil
}

// table is one tenant table as loaded for the run.
type table struct {
	kind tables.Kind
	path string
	st   store.Store
	snap *delta.Snapshot // nil: no table yet
	sum  TableSummary
	// corrupt: the Delta log cannot be read, so the table is not compared
	// row by row (a corrupt-file finding says why).
	corrupt bool
}

func (r *runner) loadTable(ctx context.Context, tenant uuid.UUID, kind tables.Kind, frontier int64) (*table, error) {
	key := tables.TableKey{Tenant: tenant, Kind: kind}
	t := &table{kind: kind, path: key.Path(), sum: TableSummary{Table: key.Path(), Version: -1, TxnVersion: -1}}
	st, err := key.Store(r.lake)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %s: %w", key.Path(), err)
	}
	t.st = st
	snap, err := delta.Load(ctx, st)
	switch {
	case errors.Is(err, delta.ErrTableNotFound):
	case errors.Is(err, delta.ErrCorruptLog):
		t.corrupt = true
		r.add(Finding{Class: CorruptFile, Tenant: tenant, Table: string(kind),
			Detail:   fmt.Sprintf("the Delta log of %s cannot be read: %v; the table was not compared", key.Path(), err),
			Evidence: map[string]string{"table": key.Path()}})
	case err != nil:
		return nil, fmt.Errorf("reconcile: read the Delta log of %s: %w", key.Path(), err)
	default:
		t.snap = snap
		t.sum.Exists, t.sum.Version, t.sum.Files = true, snap.Version(), snap.NumFiles()
		if v, ok := snap.TxnVersion(tables.AppID); ok {
			t.sum.TxnVersion = v
		}
	}
	t.sum.Cutoff = max(frontier, t.sum.TxnVersion)
	if fd := r.held[tenant]; fd != nil {
		// Held for a forked chain: the writer stopped materializing the
		// tenant, so only what its txn version covers is expected.
		t.sum.Cutoff = max(0, t.sum.TxnVersion)
		if t.sum.Cutoff < frontier {
			r.add(Finding{Class: StaleFrontier, Tenant: tenant, Table: string(kind),
				Detail: fmt.Sprintf("%s is held at txn version %d, behind the frontier %d: the lake writer does not materialize tenant %s because its chain check found %s (%s); run oml chain verify",
					key.Path(), t.sum.TxnVersion, frontier, tenant, fd.Reason, fd.Detail),
				Evidence: map[string]string{"txn_version": fmt.Sprint(t.sum.TxnVersion), "frontier": fmt.Sprint(frontier), "chain_finding": string(fd.Reason)}})
		}
	}
	return t, nil
}

// scan reads the table's live files (only the columns asked for), calling
// fn per row. A data file the log lists but the store lacks is a
// missing-in-lake finding; the scan goes on with the other files.
func (r *runner) scan(ctx context.Context, tenant uuid.UUID, t *table, cols []string, fn func(pq.Row) error) error {
	if t.snap == nil {
		return nil
	}
	files := t.snap.Files()
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		err := t.snap.Scan(ctx, t.st, delta.ScanOptions{Columns: cols, Files: []*delta.Add{f}, BatchRows: 1024},
			func(_ *delta.Add, rows []pq.Row) error {
				r.opts.Progress.LakeRows.Add(int64(len(rows)))
				for _, row := range rows {
					t.sum.LakeRows++
					if err := fn(row); err != nil {
						return err
					}
				}
				return nil
			})
		if errors.Is(err, delta.ErrCorruptData) {
			r.add(Finding{Class: CorruptFile, Tenant: tenant, Table: string(t.kind),
				Detail:   fmt.Sprintf("data file %s of %s (version %d) is not a readable Parquet file: %v; its rows are missing from the comparison", f.Path, t.path, t.snap.Version(), err),
				Evidence: map[string]string{"file": f.Path, "table_version": fmt.Sprint(t.snap.Version()), "size": fmt.Sprint(f.Size)}})
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			r.add(Finding{Class: MissingInLake, Tenant: tenant, Table: string(t.kind),
				Detail:   fmt.Sprintf("data file %s is in the Delta log of %s (version %d) but not in the store: its rows are lost", f.Path, t.path, t.snap.Version()),
				Evidence: map[string]string{"file": f.Path, "table_version": fmt.Sprint(t.snap.Version()), "size": fmt.Sprint(f.Size)}})
			continue
		}
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
	}
	return nil
}

// deadLetter is what the merge needs of one dead letter.
type deadLetter struct {
	id, outboxSeq, journalSeq int64
	op                        string
	open                      bool // neither re-enqueued nor abandoned
	pendingCopy               bool // re-enqueued, copy not yet in the lake (above the cutoff)
	abandoned                 bool // deadletter.abandoned: never to reach the lake
}

func (d deadLetter) suppresses() bool { return d.open || d.pendingCopy || d.abandoned }

func (r *runner) tenant(ctx context.Context, id uuid.UUID, name string) error {
	// Order matters (package doc): the frontier first, then the lake
	// snapshots, then the PostgreSQL snapshot, so everything in the lake
	// snapshot is visible to PostgreSQL and everything at or below the
	// frontier is in the lake snapshot.
	fr, err := outbox.ReadFrontier(ctx, r.pool)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	frontier := fr.Seq
	bronze, err := r.loadTable(ctx, id, tables.Bronze, frontier)
	if err != nil {
		return err
	}
	silver, err := r.loadTable(ctx, id, tables.Silver, frontier)
	if err != nil {
		return err
	}
	gold, err := r.loadTable(ctx, id, tables.Gold, frontier)
	if err != nil {
		return err
	}
	areas, err := r.loadTable(ctx, id, tables.Workareas, frontier)
	if err != nil {
		return err
	}

	// The lake side, sorted by key in bounded memory.
	bs := newExtSort(r.opts.TempDir, r.opts.RunBytes)
	defer bs.close()
	if err := r.sortBronze(ctx, id, bronze, bs); err != nil {
		return err
	}
	if err := bs.release(); err != nil {
		return err
	}
	ss := newExtSort(r.opts.TempDir, r.opts.RunBytes)
	defer ss.close()
	if err := r.sortSilver(ctx, id, silver, ss); err != nil {
		return err
	}
	if err := ss.release(); err != nil {
		return err
	}
	gs := newExtSort(r.opts.TempDir, r.opts.RunBytes)
	defer gs.close()
	if err := r.sortGold(ctx, id, gold, gs); err != nil {
		return err
	}
	lakeAreas, err := r.lakeAreas(ctx, id, areas)
	if err != nil {
		return err
	}

	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("reconcile: begin a read-only snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	for _, t := range []*table{bronze, silver, gold, areas} {
		if err := journalCutoffs(ctx, tx, id, t); err != nil {
			return err
		}
	}
	bronzeDL, silverDL, err := r.deadLetters(ctx, tx, id, bronze.sum.Cutoff, silver.sum.Cutoff)
	if err != nil {
		return err
	}
	if !bronze.corrupt {
		it, err := bs.sorted()
		if err != nil {
			return err
		}
		err = r.mergeBronze(ctx, tx, id, bronze, it, bronzeDL)
		it.close()
		if err != nil {
			return err
		}
	}
	if !silver.corrupt {
		it, err := ss.sorted()
		if err != nil {
			return err
		}
		err = r.mergeSilver(ctx, tx, id, silver, it, silverDL)
		it.close()
		if err != nil {
			return err
		}
	}
	if !gold.corrupt || !areas.corrupt {
		lineage, changes, err := impliedGold(ctx, tx, id)
		if err != nil {
			return err
		}
		if !gold.corrupt {
			it, err := gs.sorted()
			if err != nil {
				return err
			}
			err = r.mergeGold(ctx, tx, id, gold, it, lineage)
			it.close()
			if err != nil {
				return err
			}
		}
		if !areas.corrupt {
			if err := r.mergeWorkareas(ctx, tx, id, areas, lakeAreas, changes); err != nil {
				return err
			}
		}
	}
	if err := r.erasedKeys(ctx, tx, id); err != nil {
		return err
	}
	for _, s := range []*extSort{bs, ss, gs} {
		r.rep.Stats.SortRuns += len(s.runs)
		r.rep.Stats.PeakSortBytes = max(r.rep.Stats.PeakSortBytes, s.peak)
	}
	r.rep.Stats.LakeRows += bronze.sum.LakeRows + silver.sum.LakeRows + gold.sum.LakeRows + areas.sum.LakeRows
	r.rep.Tenants = append(r.rep.Tenants, TenantSummary{Tenant: id, Name: name, Tables: []TableSummary{bronze.sum, silver.sum, gold.sum, areas.sum}})
	return tx.Commit(ctx)
}

// journalCutoffs maps the table's outbox cutoff C to journal seqs. A
// tenant's outbox rows are inserted in journal order under its chain lock,
// so for the rows of one target, seq order is journal order — except the
// copies re-enqueued dead letters insert (an old journal_seq at a new seq),
// which are left out. The first such row above C is the first event not
// fully in the table; the last one at or below C is the last event with
// anything in it. Both are index probes on (tenant_id, target, seq).
func journalCutoffs(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, t *table) error {
	c, err := outbox.ReadJournalCutoffs(ctx, tx, tenant, string(t.kind), t.sum.Cutoff)
	if err != nil {
		return fmt.Errorf("reconcile: map the cutoff of %s to journal seqs: %w", t.path, err)
	}
	head, firstAbove, lastAtOrBelow := c.Head, c.FirstAbove, c.LastAtOrBelow
	switch {
	case firstAbove != nil:
		t.sum.JournalCutoff = *firstAbove - 1
	case head != nil:
		t.sum.JournalCutoff = *head
	}
	if lastAtOrBelow != nil {
		t.sum.JournalSeen = *lastAtOrBelow
	}
	t.sum.JournalSeen = max(t.sum.JournalSeen, t.sum.JournalCutoff)
	return nil
}

func (r *runner) deadLetters(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, bronzeCut, silverCut int64) (map[int64][]deadLetter, map[string][]deadLetter, error) {
	// Dead letters are exceptional and held in memory per tenant: the one
	// part of the run that grows with something other than the sort buffer.
	rows, err := tx.Query(ctx, `
SELECT id, outbox_seq, journal_seq, target, op, artifact_id, version, attempts, error, skipped_seq,
       reenqueued_at IS NULL AND abandoned_at IS NULL, new_outbox_seq,
       abandoned_at IS NOT NULL, coalesce(abandoned_seq, 0), coalesce(abandoned_by, ''), coalesce(abandon_reason, '')
  FROM oml.dead_letter WHERE tenant_id = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: read dead letters: %w", err)
	}
	defer rows.Close()
	bronze := map[int64][]deadLetter{}
	silver := map[string][]deadLetter{}
	for rows.Next() {
		var (
			d            deadLetter
			target       string
			artifact     *string
			version      *int32
			attempts     int
			errText      string
			skipped      int64
			newOutboxSeq *int64
			abandonedSeq int64
			abandonedBy  string
			abandonWhy   string
		)
		if err := rows.Scan(&d.id, &d.outboxSeq, &d.journalSeq, &target, &d.op, &artifact, &version, &attempts, &errText, &skipped,
			&d.open, &newOutboxSeq, &d.abandoned, &abandonedSeq, &abandonedBy, &abandonWhy); err != nil {
			return nil, nil, fmt.Errorf("reconcile: read dead letters: %w", err)
		}
		cut := bronzeCut
		if target == journal.TargetSilverClaims {
			cut = silverCut
		}
		d.pendingCopy = !d.open && newOutboxSeq != nil && *newOutboxSeq > cut
		f := Finding{Class: DeadLettered, Tenant: tenant, Table: target, Seq: d.journalSeq, OutboxSeq: d.outboxSeq,
			Detail: fmt.Sprintf("outbox row %d (%s %s) was dead-lettered after %d attempts: %s; repair the cause, then oml deadletter reenqueue %d",
				d.outboxSeq, target, d.op, attempts, errText, d.id),
			Evidence: map[string]string{"dead_letter_id": fmt.Sprint(d.id), "skipped_seq": fmt.Sprint(skipped)}}
		switch target {
		case journal.TargetBronzeEvents:
			bronze[d.journalSeq] = append(bronze[d.journalSeq], d)
		case journal.TargetSilverClaims:
			if artifact != nil && version != nil {
				silver[string(silverKey(*artifact, *version))] = append(silver[string(silverKey(*artifact, *version))], d)
				f.ArtifactID, f.Version = *artifact, *version
			}
		}
		switch {
		case d.open:
			r.add(f)
		case d.abandoned:
			f.Class = AcceptedGap
			f.Detail = fmt.Sprintf("outbox row %d (%s %s) will never reach the lake: dead letter %d was abandoned by %s (journal seq %d, deadletter.abandoned): %s",
				d.outboxSeq, target, d.op, d.id, abandonedBy, abandonedSeq, abandonWhy)
			f.Evidence["abandoned_seq"] = fmt.Sprint(abandonedSeq)
			f.TenantName = r.names[f.Tenant]
			r.rep.Accepted = append(r.rep.Accepted, f)
		}
	}
	return bronze, silver, rows.Err()
}

func anySuppress(ds []deadLetter) (deadLetter, bool) {
	for _, d := range ds {
		if d.suppresses() {
			return d, true
		}
	}
	return deadLetter{}, false
}

// ---- bronze.events ----

// bronze columns read.
var bronzeCols = tables.BronzeColumns(tables.BronzeTenantID, tables.BronzeSeq, tables.BronzeEventType, tables.BronzeHash,
	tables.BronzePayload, tables.BronzeOutboxSeq)

func bronzeKey(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }

func (r *runner) sortBronze(ctx context.Context, tenant uuid.UUID, t *table, s *extSort) error {
	var kbuf, vbuf []byte
	return r.scan(ctx, tenant, t, bronzeCols.Columns(), func(row pq.Row) error {
		b := bronzeCols.Decode(row)
		sum := sha256.Sum256([]byte(b.Payload))
		vbuf = enc(vbuf[:0]).int(b.OutboxSeq).str(b.EventType).bytes(b.Hash).bytes(sum[:]).str(b.TenantID)
		kbuf = binary.BigEndian.AppendUint64(kbuf[:0], uint64(b.Seq))
		return s.add(kbuf, vbuf)
	})
}

type bronzeLake struct {
	outboxSeq int64
	eventType string
	hash      []byte
	payload   []byte
	tenant    string
}

func decodeBronze(v []byte) (bronzeLake, error) {
	d := &dec{b: v}
	b := bronzeLake{outboxSeq: d.int(), eventType: d.str(), hash: d.bytes(), payload: d.bytes(), tenant: d.str()}
	return b, d.err
}

// group reads the lake stream grouped by key: the first record's value,
// how many records share the key, and their outbox seqs (first few).
type group struct {
	key   []byte
	value []byte
	count int
	seqs  []int64
}

type grouper struct {
	it      iterator
	pending []byte
	done    bool
	outbox  func(value []byte) int64
}

// rest hands lake and every group after it to lakeOnly: once the journal
// side of a merge is exhausted, what is left in the lake has no match.
func (g *grouper) rest(lake *group, lakeOnly func(*group) error) error {
	for lake != nil {
		if err := lakeOnly(lake); err != nil {
			return err
		}
		var err error
		if lake, err = g.next(); err != nil {
			return err
		}
	}
	return nil
}

func (g *grouper) next() (*group, error) {
	if g.done {
		return nil, nil
	}
	if g.pending == nil {
		rec, err := g.it.next()
		if err != nil {
			return nil, err
		}
		if rec == nil {
			g.done = true
			return nil, nil
		}
		g.pending = append([]byte(nil), rec...)
	}
	k, v := splitRecord(g.pending)
	out := &group{key: k, value: v, count: 1, seqs: []int64{g.outbox(v)}}
	g.pending = nil
	for {
		rec, err := g.it.next()
		if err != nil {
			return nil, err
		}
		if rec == nil {
			g.done = true
			return out, nil
		}
		k2, v2 := splitRecord(rec)
		if string(k2) != string(out.key) {
			g.pending = append([]byte(nil), rec...)
			return out, nil
		}
		out.count++
		if len(out.seqs) < 8 {
			out.seqs = append(out.seqs, g.outbox(v2))
		}
	}
}

func outboxOfBronze(v []byte) int64 { d := &dec{b: v}; return d.int() }

func seqList(s []int64) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(v)
	}
	return out
}

func (r *runner) mergeBronze(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, t *table, it iterator, dls map[int64][]deadLetter) error {
	rows, err := tx.Query(ctx, `SELECT seq, event_type, hash, sha256(payload) FROM oml.journal
WHERE tenant_id = $1 AND seq <= $2 ORDER BY seq`, tenant, t.sum.JournalSeen)
	if err != nil {
		return fmt.Errorf("reconcile: read the journal of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	g := &grouper{it: it, outbox: outboxOfBronze}
	lake, err := g.next()
	if err != nil {
		return err
	}
	table := string(tables.Bronze)
	wantTenant := tenant.String()
	lakeOnly := func(lg *group) error {
		b, err := decodeBronze(lg.value)
		if err != nil {
			return err
		}
		seq := int64(binary.BigEndian.Uint64(lg.key))
		r.add(Finding{Class: UnexpectedInLake, Tenant: tenant, Table: table, Seq: seq, OutboxSeq: b.outboxSeq,
			Detail:   fmt.Sprintf("bronze row for journal seq %d (%s) has no journal event at or below the cutoff (journal seq %d)", seq, b.eventType, t.sum.JournalSeen),
			Evidence: map[string]string{"lake_outbox_seqs": seqList(lg.seqs), "seen_journal_seq": fmt.Sprint(t.sum.JournalSeen)}})
		return nil
	}
	for rows.Next() {
		var seq int64
		var evType string
		var hash, psum []byte
		if err := rows.Scan(&seq, &evType, &hash, &psum); err != nil {
			return fmt.Errorf("reconcile: read the journal: %w", err)
		}
		r.rep.Stats.Events++
		t.sum.FoldRows++
		r.opts.Progress.Done.Add(1)
		key := bronzeKey(seq)
		for lake != nil && string(lake.key) < string(key) {
			if err := lakeOnly(lake); err != nil {
				return err
			}
			if lake, err = g.next(); err != nil {
				return err
			}
		}
		if lake == nil || string(lake.key) != string(key) {
			if _, ok := anySuppress(dls[seq]); ok || seq > t.sum.JournalCutoff {
				continue // dead-lettered (reported as such), pending a drain after re-enqueue, or not due yet
			}
			r.add(Finding{Class: MissingInLake, Tenant: tenant, Table: table, Seq: seq,
				Detail:   fmt.Sprintf("journal event %d (%s) is at or below the cutoff but not in bronze.events", seq, evType),
				Evidence: map[string]string{"hash": hex.EncodeToString(hash), "cutoff_outbox_seq": fmt.Sprint(t.sum.Cutoff)}})
			continue
		}
		b, err := decodeBronze(lake.value)
		if err != nil {
			return err
		}
		if lake.count > 1 {
			r.add(Finding{Class: DuplicateInLake, Tenant: tenant, Table: table, Seq: seq, OutboxSeq: b.outboxSeq,
				Detail:   fmt.Sprintf("journal event %d (%s) is in bronze.events %d times", seq, evType, lake.count),
				Evidence: map[string]string{"lake_outbox_seqs": seqList(lake.seqs), "copies": fmt.Sprint(lake.count)}})
		}
		var diffs []string
		if string(b.hash) != string(hash) {
			diffs = append(diffs, fmt.Sprintf("hash: lake %x, journal %x", b.hash, hash))
		}
		if string(b.payload) != string(psum) {
			diffs = append(diffs, fmt.Sprintf("payload sha256: lake %x, journal %x", b.payload, psum))
		}
		if b.eventType != evType {
			diffs = append(diffs, fmt.Sprintf("event_type: lake %q, journal %q", b.eventType, evType))
		}
		if len(diffs) > 0 {
			r.add(Finding{Class: DigestMismatch, Tenant: tenant, Table: table, Seq: seq, OutboxSeq: b.outboxSeq,
				Detail: fmt.Sprintf("bronze row of journal event %d disagrees with the journal: %s", seq, join(diffs))})
		}
		if b.tenant != wantTenant {
			r.add(Finding{Class: UnexpectedInLake, Tenant: tenant, Table: table, Seq: seq, OutboxSeq: b.outboxSeq,
				Detail: fmt.Sprintf("bronze row of journal event %d names tenant %q, not this table's tenant", seq, b.tenant)})
		}
		if b.outboxSeq > t.sum.Cutoff {
			r.add(Finding{Class: UnexpectedInLake, Tenant: tenant, Table: table, Seq: seq, OutboxSeq: b.outboxSeq,
				Detail: fmt.Sprintf("bronze row of journal event %d carries outbox seq %d, beyond the table's txn version %d: not written by the lake writer's protocol", seq, b.outboxSeq, t.sum.Cutoff)})
		}
		if lake, err = g.next(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile: read the journal: %w", err)
	}
	return g.rest(lake, lakeOnly)
}

func join(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// ---- silver.claims ----

// silver columns read, the body only when checked (silverColsBody).
var (
	silverColsNoBody = []tables.SilverCol{tables.SilverArtifactID, tables.SilverVersion, tables.SilverTenantID,
		tables.SilverWorkareaID, tables.SilverWriter, tables.SilverPrincipal, tables.SilverProvenance,
		tables.SilverPlaintextDigest, tables.SilverCiphertextDigest, tables.SilverState, tables.SilverPromotedBy,
		tables.SilverSubmittedSeq, tables.SilverPromotedSeq, tables.SilverOutboxSeq}
	silverCols     = tables.SilverColumns(silverColsNoBody...)
	silverColsBody = tables.SilverColumns(append(silverColsNoBody[:len(silverColsNoBody):len(silverColsNoBody)], tables.SilverBody)...)
)

// silverKey orders like PostgreSQL's ORDER BY artifact_id COLLATE "C",
// version: bytes of the id, a NUL (which text cannot contain, so a shorter
// id sorts first), then the version big-endian.
func silverKey(artifact string, version int32) []byte {
	return appendSilverKey(make([]byte, 0, len(artifact)+5), artifact, version)
}

func appendSilverKey(k []byte, artifact string, version int32) []byte {
	k = append(k, artifact...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(version))
}

func splitSilverKey(k []byte) (string, int32) {
	n := len(k) - 5
	if n < 0 {
		return string(k), 0
	}
	return string(k[:n]), int32(binary.BigEndian.Uint32(k[n+1:]))
}

type silverLake struct {
	outboxSeq                                    int64
	tenant, workarea, writer, principal, prov    string
	plaintextDigest, ciphertextDigest, state, by string
	submittedSeq, promotedSeq                    int64
	bodySum                                      []byte
	bodyNull, bodyRead                           bool
}

func (r *runner) sortSilver(ctx context.Context, tenant uuid.UUID, t *table, s *extSort) error {
	cols := silverColsBody
	if r.opts.SkipBodies {
		cols = silverCols
	}
	var kbuf, vbuf []byte
	return r.scan(ctx, tenant, t, cols.Columns(), func(row pq.Row) error {
		c := cols.Decode(row)
		v := enc(vbuf[:0]).int(c.OutboxSeq).str(c.TenantID).str(c.WorkareaID).str(c.Writer).
			str(c.Principal).str(c.Provenance).str(c.PlaintextDigest).str(c.CiphertextDigest).str(c.State).
			str(c.PromotedBy).int(c.SubmittedSeq).int(c.PromotedSeq)
		if r.opts.SkipBodies {
			v = v.bool(false).bool(false).bytes(nil)
		} else {
			sum := sha256.Sum256(c.Body)
			v = v.bool(true).bool(c.Body == nil).bytes(sum[:])
		}
		vbuf = v
		kbuf = appendSilverKey(kbuf[:0], c.ArtifactID, c.Version)
		return s.add(kbuf, vbuf)
	})
}

func decodeSilver(v []byte) (silverLake, error) {
	d := &dec{b: v}
	s := silverLake{outboxSeq: d.int(), tenant: d.str(), workarea: d.str(), writer: d.str(), principal: d.str(), prov: d.str(),
		plaintextDigest: d.str(), ciphertextDigest: d.str(), state: d.str(), by: d.str(), submittedSeq: d.int(), promotedSeq: d.int()}
	s.bodyRead = d.bool()
	s.bodyNull = d.bool()
	s.bodySum = d.bytes()
	return s, d.err
}

func outboxOfSilver(v []byte) int64 { d := &dec{b: v}; return d.int() }

type foldClaim struct {
	artifact                           string
	version                            int32
	state, workarea, writer, principal string
	provenance                         string
	plaintextDigest, ciphertextDigest  []byte
	promotedBy                         *string
	submittedSeq                       int64
	promotedSeq                        *int64
	lastSeq                            int64
}

func (r *runner) mergeSilver(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, t *table, it iterator, dls map[string][]deadLetter) error {
	rows, err := tx.Query(ctx, `
SELECT artifact_id, version, state, workarea_id, writer, principal, provenance, plaintext_digest, ciphertext_digest,
       promoted_by, submitted_seq, promoted_seq, last_seq
  FROM oml.claims WHERE tenant_id = $1 ORDER BY artifact_id COLLATE "C", version`, tenant)
	if err != nil {
		return fmt.Errorf("reconcile: read the claims of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	g := &grouper{it: it, outbox: outboxOfSilver}
	lake, err := g.next()
	if err != nil {
		return err
	}
	tbl := string(tables.Silver)
	lakeOnly := func(lg *group) error {
		s, err := decodeSilver(lg.value)
		if err != nil {
			return err
		}
		a, v := splitSilverKey(lg.key)
		r.add(Finding{Class: UnexpectedInLake, Tenant: tenant, Table: tbl, ArtifactID: a, Version: v, OutboxSeq: s.outboxSeq,
			Detail:   fmt.Sprintf("silver row for %s v%d: the journal fold has no such claim", a, v),
			Evidence: map[string]string{"lake_outbox_seqs": seqList(lg.seqs), "lake_state": s.state}})
		return nil
	}
	for rows.Next() {
		var c foldClaim
		if err := rows.Scan(&c.artifact, &c.version, &c.state, &c.workarea, &c.writer, &c.principal, &c.provenance,
			&c.plaintextDigest, &c.ciphertextDigest, &c.promotedBy, &c.submittedSeq, &c.promotedSeq, &c.lastSeq); err != nil {
			return fmt.Errorf("reconcile: read the claims: %w", err)
		}
		r.rep.Stats.Claims++
		t.sum.FoldRows++
		r.opts.Progress.Done.Add(1)
		key := silverKey(c.artifact, c.version)
		for lake != nil && string(lake.key) < string(key) {
			if err := lakeOnly(lake); err != nil {
				return err
			}
			if lake, err = g.next(); err != nil {
				return err
			}
		}
		_, suppressed := anySuppress(dls[string(key)])
		expected := c.promotedSeq != nil && *c.promotedSeq <= t.sum.JournalCutoff
		if lake == nil || string(lake.key) != string(key) {
			if expected && !suppressed {
				r.add(Finding{Class: MissingInLake, Tenant: tenant, Table: tbl, ArtifactID: c.artifact, Version: c.version, Seq: *c.promotedSeq,
					Detail: fmt.Sprintf("claim %s v%d was promoted at journal seq %d (at or below the cutoff %d) but is not in silver.claims",
						c.artifact, c.version, *c.promotedSeq, t.sum.JournalCutoff),
					Evidence: map[string]string{"fold_state": c.state, "cutoff_outbox_seq": fmt.Sprint(t.sum.Cutoff)}})
			}
			continue
		}
		s, err := decodeSilver(lake.value)
		if err != nil {
			return err
		}
		r.compareClaim(tenant, t, c, s, lake, suppressed)
		if lake, err = g.next(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reconcile: read the claims: %w", err)
	}
	return g.rest(lake, lakeOnly)
}

func (r *runner) compareClaim(tenant uuid.UUID, t *table, c foldClaim, s silverLake, lake *group, suppressed bool) {
	tbl := string(tables.Silver)
	base := Finding{Tenant: tenant, Table: tbl, ArtifactID: c.artifact, Version: c.version, OutboxSeq: s.outboxSeq}
	with := func(cl Class, detail string, ev map[string]string) {
		f := base
		f.Class, f.Detail, f.Evidence = cl, detail, ev
		if c.promotedSeq != nil {
			f.Seq = *c.promotedSeq
		} else {
			f.Seq = c.submittedSeq
		}
		r.add(f)
	}
	if c.promotedSeq == nil {
		with(UnexpectedInLake, fmt.Sprintf("containment breach: silver holds %s v%d, a claim that was never promoted (state %s): its held body is in the lake",
			c.artifact, c.version, c.state), map[string]string{"submitted_seq": fmt.Sprint(c.submittedSeq), "lake_outbox_seqs": seqList(lake.seqs)})
		return
	}
	if *c.promotedSeq > t.sum.JournalSeen {
		with(UnexpectedInLake, fmt.Sprintf("silver holds %s v%d, promoted at journal seq %d, after anything the table's txn version covers (journal seq %d): not written by the lake writer's protocol",
			c.artifact, c.version, *c.promotedSeq, t.sum.JournalSeen), map[string]string{"lake_outbox_seqs": seqList(lake.seqs)})
		return
	}
	if lake.count > 1 {
		with(DuplicateInLake, fmt.Sprintf("claim %s v%d is in silver.claims %d times", c.artifact, c.version, lake.count),
			map[string]string{"lake_outbox_seqs": seqList(lake.seqs), "copies": fmt.Sprint(lake.count)})
	}
	pd, cd := hex.EncodeToString(c.plaintextDigest), hex.EncodeToString(c.ciphertextDigest)
	var diffs []string
	if s.plaintextDigest != pd {
		diffs = append(diffs, fmt.Sprintf("plaintext_digest: lake %s, journal %s", s.plaintextDigest, pd))
	}
	if s.ciphertextDigest != cd {
		diffs = append(diffs, fmt.Sprintf("ciphertext_digest: lake %s, journal %s", s.ciphertextDigest, cd))
	}
	if s.bodyRead {
		switch {
		case s.bodyNull && s.state == journal.StateErased:
			// Expected: oml lake optimize/maintain null an erased claim's
			// body so vacuum can remove its ciphertext (docs/erasure.md).
		case s.bodyNull:
			diffs = append(diffs, "body: missing (null) in the lake")
		case hex.EncodeToString(s.bodySum) != cd:
			diffs = append(diffs, fmt.Sprintf("body: the lake's ciphertext hashes to %x, journal %s", s.bodySum, cd))
		}
	}
	if len(diffs) > 0 {
		with(DigestMismatch, fmt.Sprintf("silver row of %s v%d disagrees with the journalled digests: %s", c.artifact, c.version, join(diffs)), nil)
	}
	if s.tenant != tenant.String() {
		with(UnexpectedInLake, fmt.Sprintf("silver row of %s v%d names tenant %q, not this table's tenant", c.artifact, c.version, s.tenant), nil)
	}
	if suppressed {
		return // a dead letter of this claim explains any state difference
	}
	var sd []string
	// The state is comparable only when the claim's last change is at or
	// below the cutoff; otherwise the lake may rightly show an older state.
	if c.lastSeq <= t.sum.JournalCutoff && s.state != c.state {
		sd = append(sd, fmt.Sprintf("state: lake %s, journal fold %s (last changed at journal seq %d)", s.state, c.state, c.lastSeq))
	}
	attr := [][3]string{{"workarea_id", s.workarea, c.workarea}, {"writer", s.writer, c.writer}, {"principal", s.principal, c.principal},
		{"provenance", s.prov, c.provenance}, {"promoted_by", s.by, deref(c.promotedBy)},
		{"submitted_seq", fmt.Sprint(s.submittedSeq), fmt.Sprint(c.submittedSeq)},
		{"promoted_seq", fmt.Sprint(s.promotedSeq), fmt.Sprint(*c.promotedSeq)}}
	for _, a := range attr {
		if a[1] != a[2] {
			sd = append(sd, fmt.Sprintf("%s: lake %q, journal fold %q", a[0], a[1], a[2]))
		}
	}
	if len(sd) > 0 {
		with(StateMismatch, fmt.Sprintf("silver row of %s v%d disagrees with the journal fold: %s", c.artifact, c.version, join(sd)),
			map[string]string{"lake_state": s.state, "fold_state": c.state})
	}
}

func (r *runner) erasedKeys(ctx context.Context, tx pgx.Tx, tenant uuid.UUID) error {
	rows, err := tx.Query(ctx, `
SELECT k.artifact_id, max(c.last_seq), count(*)
  FROM oml.claim_keys k JOIN oml.claims c ON c.tenant_id = k.tenant_id AND c.artifact_id = k.artifact_id
 WHERE k.tenant_id = $1 AND c.state = 'erased'
 GROUP BY k.artifact_id ORDER BY k.artifact_id`, tenant)
	if err != nil {
		return fmt.Errorf("reconcile: look for data keys of erased claims: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		var seq, n int64
		if err := rows.Scan(&a, &seq, &n); err != nil {
			return fmt.Errorf("reconcile: look for data keys of erased claims: %w", err)
		}
		r.add(Finding{Class: ErasedKeyPresent, Tenant: tenant, ArtifactID: a, Seq: seq,
			Detail:   fmt.Sprintf("artifact %s was erased (journal seq %d) but its data key is still in oml.claim_keys: its ciphertext, in PostgreSQL and the lake, is still readable", a, seq),
			Evidence: map[string]string{"erased_versions": fmt.Sprint(n)}})
	}
	return rows.Err()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

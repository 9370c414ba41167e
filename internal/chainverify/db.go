package chainverify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBOptions select what VerifyDB checks.
type DBOptions struct {
	// Tenant limits the run to one tenant (the provider chain is always
	// verified too: every other chain depends on it).
	Tenant *uuid.UUID
	// From, with Tenant, resumes after this trusted head instead of the
	// genesis or the checkpoint. Its Hash is required: a head is trusted
	// because its hash came from outside the database.
	From *Head
	// Full ignores stored checkpoints and verifies every chain from its
	// genesis (checkpoints are still checked as anchors and updated).
	Full bool
	// Strict is Options.Strict: per-signature crypto/ed25519.
	Strict bool
	// RootKeyID pins the provider chain's root key (Options.RootKeyID).
	RootKeyID string
	// NoCheckpoint leaves oml.chain_checkpoints untouched.
	NoCheckpoint bool
	// Witnessed returns the newest head of tenant witnessed outside
	// PostgreSQL, if any, for the fork check.
	Witnessed func(tenant uuid.UUID) (Head, bool)
	// Bronze returns the newest event of tenant's bronze.events table (the
	// lake's second witness), if any, for the fork check.
	Bronze func(tenant uuid.UUID) (Head, bool)
	// Accepted reports whether a chain.fork_accepted event accepted the
	// disagreement of tenant's journal with this witness or bronze head
	// (Acceptances.Covers): it is then listed in Report.Accepted, not a
	// finding.
	Accepted func(tenant uuid.UUID, anchor Head) bool
	// Progress is advanced as events are checked.
	Progress *Progress
	// OnPlan, if set, is told how many events the run expects to read
	// (from oml.chain_heads; an estimate if the journal disagrees).
	OnPlan func(events int64)
	// Workers and BatchSize tune the engine (Options).
	Workers, BatchSize int
	// PageSize is the rows per keyset query (default 10000).
	PageSize int
}

// ChainReport is one chain's line in a Report.
type ChainReport struct {
	Tenant uuid.UUID `json:"tenant"`
	// FromSeq is the seq verification resumed after (0: from the genesis).
	FromSeq int64 `json:"from_seq"`
	// Seq and Hash are the verified head (the last event whose checks all
	// passed, or the resume point when nothing new was read).
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// Events is the number of events read this run.
	Events int64 `json:"events"`
	// OK is true when the chain has no finding.
	OK bool `json:"ok"`
	// Reason is the finding's reason, "" when OK.
	Reason Reason `json:"reason,omitempty"`
}

// Report is the outcome of VerifyDB.
type Report struct {
	Chains   []ChainReport `json:"chains"`
	Events   int64         `json:"events"`
	Resumed  int           `json:"resumed"`
	Findings []Finding     `json:"findings"`
	// Accepted lists tail-lost and fork disagreements with a witness or
	// bronze head that a chain.fork_accepted accepted (never failing).
	Accepted []Finding `json:"accepted_forks"`
	Rule     string    `json:"signature_rule"`
	// Checkpoints is how many verified heads were stored this run.
	Checkpoints int           `json:"checkpoints_stored"`
	Elapsed     time.Duration `json:"-"`
}

// ErrNoProvider means the database has no provider chain: nothing was ever
// initialised, so there is nothing to verify against.
var ErrNoProvider = errors.New("the journal has no provider chain: run `oml init` first")

type dbTenant struct {
	id uuid.UUID
	// dbSeq is the journal's last seq for this tenant, when an anchor check
	// read it; a chain resumed at dbSeq has nothing new to read.
	dbSeq      int64
	dbSeqKnown bool
	start      Head // trusted start (zero: genesis)
	resumed    bool
	anchorBad  *Finding
	accepted   []Finding
	head       *Head // oml.chain_heads row
	result     *ChainResult
}

// VerifyDB verifies the journal in pool: every chain (or one tenant's and
// the provider's), against oml.chain_heads, stored checkpoints and the
// witnessed heads, reading everything in one REPEATABLE READ, READ ONLY
// snapshot so heads and events agree with each other. It streams each
// chain in seq order and never loads a chain into memory.
//
// Checkpoints (oml.chain_checkpoints, "last fully verified head") are
// stored only for chains that came out clean, after every check on them
// (links, signatures, head agreement, anchors) passed.
func VerifyDB(ctx context.Context, pool *pgxpool.Pool, opts DBOptions) (Report, error) {
	started := time.Now()
	if opts.From != nil && opts.Tenant == nil {
		return Report{}, errors.New("a trusted --from head needs --tenant")
	}
	if opts.From != nil && (opts.From.Seq < 1 || len(opts.From.Hash) != 32) {
		return Report{}, errors.New("a trusted --from head needs a seq of 1 or more and a 32-byte hash")
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Report{}, fmt.Errorf("begin the verification snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	tenants, err := planTenants(ctx, tx, opts)
	if err != nil {
		return Report{}, err
	}
	if len(tenants) == 0 {
		return Report{}, ErrNoProvider
	}
	// A journal with tenants but no provider chain was tampered with; the
	// engine reports it (and every tenant's genesis then fails).
	byID := make(map[uuid.UUID]*dbTenant, len(tenants))
	var expect int64
	for _, t := range tenants {
		byID[t.id] = t
		if t.head != nil && t.head.Seq > t.start.Seq {
			expect += t.head.Seq - t.start.Seq
		}
	}
	if opts.OnPlan != nil {
		opts.OnPlan(expect)
	}

	cw := &checkpointWriter{pool: pool, off: opts.NoCheckpoint}
	if !cw.off {
		// A hot standby verifies fine but cannot store checkpoints.
		var standby bool
		if err := tx.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
			return Report{}, fmt.Errorf("ask whether the database is a standby: %w", err)
		}
		cw.off = standby
	}
	var mu sync.Mutex
	var cbErr error
	eopts := Options{
		Workers: opts.Workers, BatchSize: opts.BatchSize, Strict: opts.Strict,
		RootKeyID: opts.RootKeyID, Progress: opts.Progress,
		Start: func(id uuid.UUID) (Head, bool) {
			if t := byID[id]; t != nil && !t.start.IsZero() {
				return t.start, true
			}
			return Head{}, false
		},
		OnChain: func(r ChainResult) {
			t := byID[r.Tenant]
			if t == nil {
				return // a tenant the plan did not list: the source never yields one
			}
			mu.Lock()
			defer mu.Unlock()
			rr := r
			t.result = &rr
			if f := t.finding(); f == nil && cbErr == nil {
				cbErr = cw.add(ctx, t.id, t.verifiedHead())
			}
		},
	}
	var broken uuid.UUID
	var brokenSet bool
	eopts.OnBroken = func(id uuid.UUID) { broken, brokenSet = id, true }
	skip := func(id uuid.UUID) bool { return brokenSet && broken == id }
	sum, err := Verify(ctx, journalSource(ctx, tx, tenants, opts.PageSize, skip), eopts)
	if err != nil {
		// The chains finished before the failure were fully checked: keep
		// their checkpoints so a re-run does not redo them.
		_ = cw.flush(context.WithoutCancel(ctx))
		return Report{}, err
	}
	if cbErr != nil {
		return Report{}, cbErr
	}

	rep := Report{Events: sum.Events, Rule: "cofactored-batch"}
	if opts.Strict {
		rep.Rule = "strict-stdlib"
	}
	for _, t := range tenants {
		if t.resumed {
			rep.Resumed++
		}
		rep.Accepted = append(rep.Accepted, t.accepted...)
		f := t.finding()
		if t.result == nil && f == nil {
			// Nothing new was read for this chain: it is clean as of its
			// start (checked against its head above); keep the checkpoint.
			if err := cw.add(ctx, t.id, t.verifiedHead()); err != nil {
				return Report{}, err
			}
		}
		h := t.verifiedHead()
		cr := ChainReport{Tenant: t.id, FromSeq: t.start.Seq, Seq: h.Seq, Hash: h.HashHex(), OK: f == nil}
		if t.result != nil {
			cr.Events = t.result.Events
		}
		if f != nil {
			cr.Reason = f.Reason
			rep.Findings = append(rep.Findings, *f)
		}
		rep.Chains = append(rep.Chains, cr)
	}
	// The engine may also report a provider chain it did not find.
	for _, f := range sum.Findings {
		if byID[f.Tenant] == nil {
			rep.Findings = append(rep.Findings, f)
		}
	}
	if opts.Tenant != nil && byID[*opts.Tenant] == nil {
		if _, created := sum.Created[*opts.Tenant]; !created {
			return Report{}, fmt.Errorf("tenant %s has no journal events, chain head or checkpoint, and the provider chain never created it: check the tenant id", *opts.Tenant)
		}
	}
	// A tenant the provider chain created must have a chain: one whose
	// events, head and checkpoint were all deleted is found only here.
	for id, pseq := range sum.Created {
		if byID[id] != nil || (opts.Tenant != nil && *opts.Tenant != id) {
			continue
		}
		f := Finding{Tenant: id, Seq: 1, Reason: ReasonBadGenesis,
			Detail:   fmt.Sprintf("provider seq %d created this tenant but its chain is missing from the journal", pseq),
			Evidence: map[string]string{"provider_seq": fmt.Sprint(pseq)}}
		rep.Findings = append(rep.Findings, f)
		rep.Chains = append(rep.Chains, ChainReport{Tenant: id, Reason: f.Reason})
	}
	if err := cw.flush(ctx); err != nil {
		return Report{}, err
	}
	rep.Checkpoints = cw.stored
	sortFindings(rep.Findings)
	slices.SortFunc(rep.Chains, func(a, b ChainReport) int { return bytes.Compare(a.Tenant[:], b.Tenant[:]) })
	rep.Elapsed = time.Since(started)
	return rep, nil
}

// verifiedHead is the chain's head as verified by this run: the engine's
// last good event, else the trusted start.
func (t *dbTenant) verifiedHead() Head {
	if t.result != nil && t.result.Finding == nil && !t.result.Last.IsZero() {
		return t.result.Last
	}
	return t.start
}

// finding is the chain's first bad event across the engine, the anchors
// (checkpoint, trusted --from, witness) and the chain_heads row: the lowest
// seq wins; on a tie the engine's more specific reason does.
func (t *dbTenant) finding() *Finding {
	var best *Finding
	consider := func(f *Finding) {
		if f != nil && (best == nil || f.Seq < best.Seq) {
			best = f
		}
	}
	if t.result != nil {
		consider(t.result.Finding)
	}
	consider(t.anchorBad)
	if best == nil {
		consider(t.headFinding())
	}
	return best
}

func (t *dbTenant) headFinding() *Finding {
	last := t.verifiedHead()
	ev := map[string]string{"verified_seq": fmt.Sprint(last.Seq), "verified_hash": last.HashHex()}
	if t.head == nil {
		if last.IsZero() {
			return nil
		}
		return &Finding{Tenant: t.id, Seq: 1, Reason: ReasonHeadMismatch, Evidence: ev,
			Detail: "oml.chain_heads has no row for a tenant with journal events"}
	}
	ev["head_seq"], ev["head_hash"] = fmt.Sprint(t.head.Seq), t.head.HashHex()
	switch {
	case t.head.Seq == last.Seq && bytes.Equal(t.head.Hash, last.Hash):
		return nil
	case t.head.Seq == last.Seq:
		return &Finding{Tenant: t.id, Seq: last.Seq, Reason: ReasonHeadMismatch, Evidence: ev,
			Detail: fmt.Sprintf("oml.chain_heads holds a different hash for seq %d than the journal", last.Seq)}
	case t.head.Seq > last.Seq:
		return &Finding{Tenant: t.id, Seq: last.Seq + 1, Reason: ReasonHeadMismatch, Evidence: ev,
			Detail: fmt.Sprintf("oml.chain_heads says seq %d but the journal ends at seq %d", t.head.Seq, last.Seq)}
	default:
		return &Finding{Tenant: t.id, Seq: t.head.Seq + 1, Reason: ReasonHeadMismatch, Evidence: ev,
			Detail: fmt.Sprintf("the journal runs to seq %d past the oml.chain_heads head at seq %d", last.Seq, t.head.Seq)}
	}
}

// planTenants lists every chain to verify, in ascending tenant order (the
// provider first): tenants with journal rows, a chain head or a checkpoint,
// so a chain whose events were all deleted is still visited. For each it
// decides the trusted start and checks the anchors.
func planTenants(ctx context.Context, tx pgx.Tx, opts DBOptions) ([]*dbTenant, error) {
	// A loose index scan over the journal's primary key lists its tenants
	// in O(tenants · log n) instead of reading every row.
	const q = `
WITH RECURSIVE jt AS (
    (SELECT tenant_id FROM oml.journal ORDER BY tenant_id LIMIT 1)
  UNION ALL
    SELECT (SELECT j.tenant_id FROM oml.journal j WHERE j.tenant_id > jt.tenant_id ORDER BY j.tenant_id LIMIT 1)
    FROM jt WHERE jt.tenant_id IS NOT NULL
), ids AS (
    SELECT tenant_id FROM jt WHERE tenant_id IS NOT NULL
  UNION SELECT tenant_id FROM oml.chain_heads
  UNION SELECT tenant_id FROM oml.chain_checkpoints
)
SELECT ids.tenant_id, h.seq, h.hash, c.seq, c.hash
FROM ids
LEFT JOIN oml.chain_heads h USING (tenant_id)
LEFT JOIN oml.chain_checkpoints c USING (tenant_id)
WHERE $1::uuid IS NULL OR ids.tenant_id IN ($1::uuid, '00000000-0000-0000-0000-000000000000')
ORDER BY ids.tenant_id`
	var only *uuid.UUID
	if opts.Tenant != nil {
		only = opts.Tenant
	}
	rows, err := tx.Query(ctx, q, only)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
			return nil, fmt.Errorf("the database has no oml schema or an older one (%s): run oml migrate", pe.Message)
		}
		return nil, fmt.Errorf("list the chains to verify: %w", err)
	}
	type cp struct {
		seq  *int64
		hash []byte
	}
	var out []*dbTenant
	cps := map[uuid.UUID]cp{}
	for rows.Next() {
		var t dbTenant
		var hs, cs *int64
		var hh, ch []byte
		if err := rows.Scan(&t.id, &hs, &hh, &cs, &ch); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the chains to verify: %w", err)
		}
		if hs != nil {
			t.head = &Head{Seq: *hs, Hash: hh}
		}
		cps[t.id] = cp{cs, ch}
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the chains to verify: %w", err)
	}
	for _, t := range out {
		anchors := []struct {
			kind string
			h    Head
		}{}
		if c := cps[t.id]; c.seq != nil {
			anchors = append(anchors, struct {
				kind string
				h    Head
			}{"checkpoint", Head{Seq: *c.seq, Hash: c.hash}})
		}
		if opts.Witnessed != nil {
			if w, ok := opts.Witnessed(t.id); ok {
				anchors = append(anchors, struct {
					kind string
					h    Head
				}{AnchorWitness, w})
			}
		}
		if opts.Bronze != nil {
			if b, ok := opts.Bronze(t.id); ok {
				anchors = append(anchors, struct {
					kind string
					h    Head
				}{AnchorBronze, b})
			}
		}
		if opts.From != nil && t.id == *opts.Tenant {
			anchors = append(anchors, struct {
				kind string
				h    Head
			}{"trusted --from head", *opts.From})
		}
		for _, a := range anchors {
			f, dbSeq, err := checkAnchor(ctx, tx, t.id, a.kind, a.h)
			if err != nil {
				return nil, err
			}
			t.dbSeq, t.dbSeqKnown = dbSeq, true
			if f != nil && (a.kind == AnchorWitness || a.kind == AnchorBronze) && opts.Accepted != nil && opts.Accepted(t.id, a.h) {
				t.accepted = append(t.accepted, *f)
				continue
			}
			if f != nil && (t.anchorBad == nil || f.Seq < t.anchorBad.Seq) {
				t.anchorBad = f
			}
		}
		if t.id == ProviderTenant {
			continue // always from its genesis
		}
		switch c := cps[t.id]; {
		case opts.From != nil && t.id == *opts.Tenant:
			if t.anchorBad == nil {
				t.start = *opts.From
			}
		case !opts.Full && !opts.Strict && c.seq != nil && t.anchorBad == nil:
			t.start = Head{Seq: *c.seq, Hash: c.hash}
			t.resumed = true
		}
	}
	return out, nil
}

// checkAnchor compares a head known from elsewhere (a checkpoint, a
// witness, a trusted --from) with the journal: a journal that no longer
// reaches the anchored seq lost its tail; one that holds another hash there
// forked. Both heads go into the evidence.
func checkAnchor(ctx context.Context, q Querier, tenant uuid.UUID, kind string, a Head) (f *Finding, dbSeq int64, err error) {
	var stored, dbHash []byte
	var maxSeq *int64
	err = q.QueryRow(ctx, `
SELECT (SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2),
       m.seq, (SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = m.seq)
FROM (SELECT max(seq) AS seq FROM oml.journal WHERE tenant_id = $1) m`, tenant, a.Seq).Scan(&stored, &maxSeq, &dbHash)
	if err != nil {
		return nil, 0, fmt.Errorf("check tenant %s against its %s: %w", tenant, kind, err)
	}
	if maxSeq != nil {
		dbSeq = *maxSeq
	}
	return anchorFinding(tenant, kind, a, stored, dbSeq, dbHash), dbSeq, nil
}

func checkAnchorQ(ctx context.Context, q Querier, tenant uuid.UUID, kind string, a Head) (*Finding, error) {
	f, _, err := checkAnchor(ctx, q, tenant, kind, a)
	return f, err
}

func anchorFinding(tenant uuid.UUID, kind string, a Head, stored []byte, dbSeq int64, dbHash []byte) *Finding {
	ev := map[string]string{
		"anchor":       kind,
		"anchor_seq":   fmt.Sprint(a.Seq),
		"anchor_hash":  a.HashHex(),
		"db_seq":       fmt.Sprint(dbSeq),
		"db_head_hash": hex.EncodeToString(dbHash),
	}
	switch {
	case stored == nil && dbSeq < a.Seq:
		return &Finding{Tenant: tenant, Seq: dbSeq + 1, Reason: ReasonTailLost, Evidence: ev,
			Detail: fmt.Sprintf("the journal ends at seq %d but the %s saw seq %d: committed events were lost", dbSeq, kind, a.Seq)}
	case stored == nil:
		return &Finding{Tenant: tenant, Seq: a.Seq, Reason: ReasonTailLost, Evidence: ev,
			Detail: fmt.Sprintf("seq %d, seen by the %s, is missing from the journal", a.Seq, kind)}
	case !bytes.Equal(stored, a.Hash):
		ev["db_hash"] = hex.EncodeToString(stored)
		return &Finding{Tenant: tenant, Seq: a.Seq, Reason: ReasonFork, Evidence: ev,
			Detail: fmt.Sprintf("the journal holds a different event at seq %d than the %s saw", a.Seq, kind)}
	}
	return nil
}

// sortFindings orders findings by tenant (the provider first), then seq.
func sortFindings(fs []Finding) {
	slices.SortFunc(fs, func(a, b Finding) int {
		if c := bytes.Compare(a.Tenant[:], b.Tenant[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}

// defaultJournalPage is how many rows one keyset query reads. Pages keep a
// broken chain's unread rest from being sent at all, at one round trip per
// 10k rows.
const defaultJournalPage = 10000

// journalSource streams the planned chains, each in seq order after its
// start, in keyset pages of (tenant_id, seq) on the primary key. Rows are
// scanned into one reused Event (the engine copies what it keeps). Once
// skip reports a chain broken, the rest of its rows are not read.
func journalSource(ctx context.Context, tx pgx.Tx, tenants []*dbTenant, page int, skip func(uuid.UUID) bool) iter.Seq2[*Event, error] {
	if page <= 0 {
		page = defaultJournalPage
	}
	return func(yield func(*Event, error) bool) {
		ev := &Event{}
		for _, t := range tenants {
			after := t.start.Seq
			if t.dbSeqKnown && t.dbSeq <= after {
				continue // nothing past the trusted start (read in the same snapshot)
			}
			for {
				n, stop, err := journalPageRead(ctx, tx, t.id, after, page, ev, yield, skip)
				if err != nil {
					yield(nil, fmt.Errorf("read the journal of tenant %s: %w", t.id, err))
					return
				}
				if stop {
					return
				}
				if n < page || skip(t.id) {
					break
				}
				after = ev.Seq
			}
		}
	}
}

func journalPageRead(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, after int64, page int, ev *Event,
	yield func(*Event, error) bool, skip func(uuid.UUID) bool) (n int, stop bool, err error) {
	rows, err := tx.Query(ctx, `
SELECT seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at
FROM oml.journal WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, tenant, after, page)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		ev.Tenant = tenant
		if err := rows.Scan(&ev.Seq, &ev.PrevHash, &ev.Hash, &ev.Signature, &ev.KeyID,
			&ev.EventType, &ev.Payload, &ev.RecordedAt); err != nil {
			return n, false, err
		}
		n++
		if !yield(ev, nil) {
			return n, true, nil
		}
		if skip(tenant) {
			return n, false, nil
		}
	}
	return n, false, rows.Err()
}

// checkpointWriter upserts verified heads in batches, on its own
// connection (the verification snapshot is read only). A checkpoint only
// moves forward.
type checkpointWriter struct {
	pool    *pgxpool.Pool
	off     bool
	stored  int
	tenants []uuid.UUID
	seqs    []int64
	hashes  [][]byte
}

const checkpointBatch = 500

func (w *checkpointWriter) add(ctx context.Context, t uuid.UUID, h Head) error {
	if w.off || h.IsZero() {
		return nil
	}
	w.tenants = append(w.tenants, t)
	w.seqs = append(w.seqs, h.Seq)
	w.hashes = append(w.hashes, slices.Clone(h.Hash))
	if len(w.tenants) >= checkpointBatch {
		return w.flush(ctx)
	}
	return nil
}

func (w *checkpointWriter) flush(ctx context.Context) error {
	if len(w.tenants) == 0 {
		return nil
	}
	_, err := w.pool.Exec(ctx, `
INSERT INTO oml.chain_checkpoints AS c (tenant_id, seq, hash, verified_at)
SELECT t.tenant_id, t.seq, t.hash, now()
FROM unnest($1::uuid[], $2::bigint[], $3::bytea[]) AS t (tenant_id, seq, hash)
ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, verified_at = excluded.verified_at
WHERE c.seq <= excluded.seq`, w.tenants, w.seqs, w.hashes)
	if err != nil {
		return fmt.Errorf("store verification checkpoints: %w", err)
	}
	w.stored += len(w.tenants)
	w.tenants, w.seqs, w.hashes = w.tenants[:0], w.seqs[:0], w.hashes[:0]
	return nil
}

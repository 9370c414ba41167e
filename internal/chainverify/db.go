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
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
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
	// SinceCheckpoint is the fast path: each tenant's chain resumes after
	// its stored checkpoint (the last verified head) instead of its genesis,
	// so only what was appended since is read. Without it (the default)
	// every chain is verified from its genesis; checkpoints are then still
	// checked as anchors and updated. An auditor's run must not set it: an
	// edit of an event below a checkpoint is invisible to it (ScrubEvents is
	// how an incremental caller still reaches old history).
	SinceCheckpoint bool
	// ScrubEvents, with SinceCheckpoint, also re-verifies from their genesis
	// the chains whose checkpoints were least recently verified in full, as
	// many whole chains as fit in this many events (the scrub: run often
	// enough, every event is re-checked; Report.LastFullPass says since
	// when). A chain longer than ScrubEvents is never scrubbed and is listed
	// in Report.ScrubTooLarge. 0: no scrub.
	ScrubEvents int64
	// ScrubMinAge: only chains last verified in full longer ago than this
	// (by the database's clock) are due for the scrub, so a caller that runs
	// often (doctor --watch) does not re-read the same history each time.
	ScrubMinAge time.Duration
	// Full is accepted for compatibility and ignored: verifying every chain
	// from its genesis is the default (SinceCheckpoint is the fast path).
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
	// OnProviderTrust, if set, is told the provider chain's keys and
	// revocations as this run verified them (Options.OnProvider), as soon
	// as the provider chain is done: on the fast path that is exactly what
	// ProviderTrustSinceCheckpoint returns (read from the genesis,
	// signatures up to an intact checkpoint skipped), and with the scrub
	// due or without SinceCheckpoint it is ProviderTrust's. oml doctor's
	// fork check takes it instead of reading the provider chain again.
	OnProviderTrust func(keys map[string]*Key, revoked map[string]Revocation)
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
	// Scrubbed is true when the chain had a checkpoint but was re-verified
	// from its genesis by the scrub (DBOptions.ScrubEvents).
	Scrubbed bool `json:"scrubbed,omitempty"`
	// FullPassAt, for a clean chain, is the time since which every event up
	// to Seq was last verified (from the genesis): the start of this run if
	// it read the chain from its genesis, else when its checkpoint's range
	// was last verified in full.
	FullPassAt *time.Time `json:"full_pass_at,omitempty"`
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
	Checkpoints int `json:"checkpoints_stored"`
	// Invalidated is how many checkpoints this run moved back below a
	// finding (or removed): a checkpoint at or above a chain's first bad
	// event is no longer a place to resume from.
	Invalidated int `json:"checkpoints_invalidated"`
	// Scrubbed is how many checkpointed chains the scrub re-verified from
	// their genesis (DBOptions.ScrubEvents), ScrubEvents how many events
	// that read, ScrubTooLarge the chains too long for the scrub budget.
	Scrubbed      int         `json:"scrubbed"`
	ScrubEvents   int64       `json:"scrub_events"`
	ScrubTooLarge []uuid.UUID `json:"scrub_too_large"`
	// LastFullPass is the oldest FullPassAt over the clean chains: every
	// event of every clean chain up to its verified head was re-verified at
	// or after it. Nil when no chain is clean.
	LastFullPass *time.Time `json:"last_full_pass,omitempty"`
	// ProviderSignaturesSkipped is how many provider-chain signatures this
	// run did not verify: events up to its checkpoint, hash-checked and
	// confirmed against it (Options.ProviderSigned; 0 when the provider
	// chain was verified in full).
	ProviderSignaturesSkipped int64 `json:"provider_signatures_skipped"`
	// LastFullPassTenant is the chain LastFullPass is about.
	LastFullPassTenant *uuid.UUID    `json:"last_full_pass_tenant,omitempty"`
	Elapsed            time.Duration `json:"-"`
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
	scrubbed   bool
	anchorBad  *Finding
	accepted   []Finding
	head       *Head // oml.chain_heads row
	result     *ChainResult
	// cp is the stored checkpoint, if any; cpVerifiedAt is when its range
	// was last verified from the genesis.
	cp           *Head
	cpVerifiedAt time.Time
	// signed (the provider chain only): its checkpoint, when the run may
	// skip the signatures up to it (Options.ProviderSigned).
	signed *Head
}

// fullPass reports whether this run verified the chain's events from its
// genesis, signatures included.
func (t *dbTenant) fullPass() bool {
	return t.start.IsZero() && (t.result == nil || t.result.SignaturesSkipped == 0)
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

	// The snapshot's start on the server's clock: what a chain verified
	// from its genesis in this run records as its last full pass.
	var runAt time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&runAt); err != nil {
		return Report{}, fmt.Errorf("begin the verification snapshot: %w", err)
	}
	tenants, err := planTenants(ctx, tx, opts)
	if err != nil {
		return Report{}, err
	}
	if len(tenants) == 0 {
		return Report{}, ErrNoProvider
	}
	scrubbed, tooLarge := planScrub(tenants, opts, runAt)
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

	cw := &checkpointWriter{pool: pool, off: opts.NoCheckpoint, runAt: runAt}
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
		RootKeyID: opts.RootKeyID, Progress: opts.Progress, ProviderSigned: tenants[0].signed,
		OnProvider: opts.OnProviderTrust,
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
				cbErr = cw.add(ctx, t.id, t.verifiedHead(), t.fullPass())
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

	rep := Report{Events: sum.Events, Rule: "cofactored-batch", Scrubbed: scrubbed, ScrubTooLarge: tooLarge}
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
			if err := cw.add(ctx, t.id, t.verifiedHead(), t.fullPass()); err != nil {
				return Report{}, err
			}
		}
		if t.result != nil && t.result.Finding != nil {
			// Only the chain's own findings move its checkpoint: head and
			// anchor findings are recomputed from stored state every run
			// (and a checkpoint an anchor finding is about is its evidence).
			cw.invalidate(t, t.result.Finding)
		}
		h := t.verifiedHead()
		cr := ChainReport{Tenant: t.id, FromSeq: t.start.Seq, Seq: h.Seq, Hash: h.HashHex(), OK: f == nil, Scrubbed: t.scrubbed}
		if t.result != nil {
			cr.Events = t.result.Events
			rep.ProviderSignaturesSkipped += t.result.SignaturesSkipped
			if t.scrubbed {
				rep.ScrubEvents += t.result.Events
			}
		}
		if f != nil {
			cr.Reason = f.Reason
			rep.Findings = append(rep.Findings, *f)
		} else if at := t.fullPassAt(runAt); at != nil {
			cr.FullPassAt = at
			if rep.LastFullPass == nil || at.Before(*rep.LastFullPass) {
				id := t.id
				rep.LastFullPass, rep.LastFullPassTenant = at, &id
			}
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
	if err := cw.rewind(ctx); err != nil {
		return Report{}, err
	}
	rep.Checkpoints = cw.stored
	rep.Invalidated = cw.invalidated
	sortFindings(rep.Findings)
	slices.SortFunc(rep.Chains, func(a, b ChainReport) int { return bytes.Compare(a.Tenant[:], b.Tenant[:]) })
	rep.Elapsed = time.Since(started)
	return rep, nil
}

// fullPassAt is when every event of the (clean) chain up to its verified
// head was last verified from the genesis: now if this run started there,
// else when its checkpoint's range last was; nil if unknown (a trusted
// --from start without a checkpoint).
func (t *dbTenant) fullPassAt(runAt time.Time) *time.Time {
	switch {
	case t.fullPass():
		return &runAt
	case (t.resumed || t.signed != nil) && t.cp != nil:
		at := t.cpVerifiedAt
		return &at
	}
	return nil
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
SELECT ids.tenant_id, h.seq, h.hash, c.seq, c.hash, c.verified_at
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
	var out []*dbTenant
	for rows.Next() {
		var t dbTenant
		var hs, cs *int64
		var hh, ch []byte
		var cat *time.Time
		if err := rows.Scan(&t.id, &hs, &hh, &cs, &ch, &cat); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the chains to verify: %w", err)
		}
		if hs != nil {
			t.head = &Head{Seq: *hs, Hash: hh}
		}
		if cs != nil {
			t.cp = &Head{Seq: *cs, Hash: ch}
			if cat != nil {
				t.cpVerifiedAt = *cat
			}
		}
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the chains to verify: %w", err)
	}
	// Every tenant's anchors are compared with the journal in a few round
	// trips (checkAnchors), not one query per anchor: at thousands of
	// tenants that was most of the plan's cost. The verdicts are applied in
	// the order the anchors were listed, as one query per anchor did.
	var checks []anchorCheck
	var owner []*dbTenant
	for _, t := range out {
		add := func(kind string, h Head) {
			checks = append(checks, anchorCheck{tenant: t.id, kind: kind, head: h})
			owner = append(owner, t)
		}
		if t.cp != nil {
			add("checkpoint", *t.cp)
		}
		if opts.Witnessed != nil {
			if w, ok := opts.Witnessed(t.id); ok {
				add(AnchorWitness, w)
			}
		}
		if opts.Bronze != nil {
			if b, ok := opts.Bronze(t.id); ok {
				add(AnchorBronze, b)
			}
		}
		if opts.From != nil && t.id == *opts.Tenant {
			add("trusted --from head", *opts.From)
		}
	}
	found, dbSeqs, err := checkAnchorsSeq(ctx, tx, checks)
	if err != nil {
		return nil, err
	}
	for i, a := range checks {
		t, f := owner[i], found[i]
		t.dbSeq, t.dbSeqKnown = dbSeqs[i], true
		if f != nil && (a.kind == AnchorWitness || a.kind == AnchorBronze) && opts.Accepted != nil && opts.Accepted(t.id, a.head) {
			t.accepted = append(t.accepted, *f)
			continue
		}
		if f != nil && (t.anchorBad == nil || f.Seq < t.anchorBad.Seq) {
			t.anchorBad = f
		}
	}
	for _, t := range out {
		if t.id == ProviderTenant {
			// Always read from its genesis (it defines the keys and the
			// tenants); on the fast path its signatures up to an intact
			// checkpoint are skipped unless the scrub says it is due.
			if opts.SinceCheckpoint && !opts.Strict && t.cp != nil && t.anchorBad == nil {
				t.signed = t.cp
			}
			continue
		}
		switch {
		case opts.From != nil && t.id == *opts.Tenant:
			if t.anchorBad == nil {
				t.start = *opts.From
			}
		case opts.SinceCheckpoint && !opts.Strict && t.cp != nil && t.anchorBad == nil:
			t.start = *t.cp
			t.resumed = true
		}
	}
	return out, nil
}

// planScrub picks, among the chains planTenants resumed from a checkpoint,
// those least recently verified from their genesis (oldest checkpoint
// verified_at first, then tenant id) and has them verified from their
// genesis instead, as many whole chains as fit in opts.ScrubEvents events.
// verified_at is the scrub's persisted cursor: every chain verified from its
// genesis stores the run's start there, so the next run moves on to the
// next-oldest chains and each one comes round again. Only chains verified
// in full more than opts.ScrubMinAge ago are due. A chain longer than the
// whole budget is never picked and is returned in tooLarge.
func planScrub(tenants []*dbTenant, opts DBOptions, runAt time.Time) (scrubbed int, tooLarge []uuid.UUID) {
	tooLarge = []uuid.UUID{}
	if !opts.SinceCheckpoint || opts.ScrubEvents <= 0 {
		return 0, tooLarge
	}
	due := func(t *dbTenant) bool { return t.cpVerifiedAt.Before(runAt.Add(-opts.ScrubMinAge)) }
	var cands []*dbTenant
	for _, t := range tenants {
		if t.signed != nil && due(t) {
			// The provider chain is read in full every run anyway: when its
			// last full pass is due, its signatures are verified too, outside
			// the budget (a long provider chain is never "too large").
			t.signed = nil
		}
		if t.resumed && due(t) {
			cands = append(cands, t)
		}
	}
	slices.SortStableFunc(cands, func(a, b *dbTenant) int {
		if c := a.cpVerifiedAt.Compare(b.cpVerifiedAt); c != 0 {
			return c
		}
		return bytes.Compare(a.id[:], b.id[:])
	})
	var used int64
	for _, t := range cands {
		n := t.start.Seq
		if n > opts.ScrubEvents {
			tooLarge = append(tooLarge, t.id)
			continue
		}
		if used+n > opts.ScrubEvents {
			break // the rest wait for the next run, in order
		}
		used += n
		t.start, t.resumed, t.scrubbed = Head{}, false, true
		scrubbed++
	}
	return scrubbed, tooLarge
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

// anchorCheck is one head known from outside the journal, to compare with
// it (checkAnchors).
type anchorCheck struct {
	tenant uuid.UUID
	kind   string
	head   Head
}

// anchorChunk is how many anchors one round trip of checkAnchors compares
// (a variable for the tests of several chunks).
var anchorChunk = 5000

// anchorParallel is how many chunks run at once on a pool (a transaction
// has one connection: its chunks run one after another). The fork check
// compares two anchors per tenant, three chunks at 5,000 tenants, and ran
// them one after another after the lake read.
const anchorParallel = 4

// checkAnchors is checkAnchor for many anchors at once: one round trip per
// anchorChunk anchors instead of one per anchor, so a fork check over
// thousands of tenants costs a few queries, not thousands (the same two
// index lookups per anchor, done by the server). The findings are in the
// order of as (nil where the journal holds the anchor).
func checkAnchors(ctx context.Context, q Querier, as []anchorCheck) ([]*Finding, error) {
	out, _, err := checkAnchorsSeq(ctx, q, as)
	return out, err
}

// checkAnchorsSeq is checkAnchors that also returns, per anchor, the
// journal's last seq for its tenant (0 when the tenant has no event).
func checkAnchorsSeq(ctx context.Context, q Querier, as []anchorCheck) ([]*Finding, []int64, error) {
	out := make([]*Finding, len(as))
	seqsOut := make([]int64, len(as))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(1)
	if _, pool := q.(*pgxpool.Pool); pool {
		g.SetLimit(anchorParallel)
	}
	for lo := 0; lo < len(as); lo += anchorChunk {
		hi := min(lo+anchorChunk, len(as))
		g.Go(func() error { return checkAnchorChunk(gctx, q, as, lo, hi, out, seqsOut) })
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return out, seqsOut, nil
}

// checkAnchorChunk compares as[lo:hi] in one statement, into out and
// seqsOut at the same indexes.
func checkAnchorChunk(ctx context.Context, q Querier, as []anchorCheck, lo, hi int, out []*Finding, seqsOut []int64) error {
	// pgtype.UUID, not uuid.UUID: pgx encodes it straight to binary,
	// where uuid.UUID goes through its text driver.Valuer (4% of a
	// doctor run's CPU at 20,000 tables).
	tenants := make([]pgtype.UUID, 0, hi-lo)
	seqs := make([]int64, 0, hi-lo)
	for _, a := range as[lo:hi] {
		tenants = append(tenants, pgtype.UUID{Bytes: a.tenant, Valid: true})
		seqs = append(seqs, a.head.Seq)
	}
	rows, err := q.Query(ctx, `
SELECT a.i,
       (SELECT hash FROM oml.journal j WHERE j.tenant_id = a.t AND j.seq = a.s),
       m.seq,
       (SELECT hash FROM oml.journal j WHERE j.tenant_id = a.t AND j.seq = m.seq)
FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS a(t, s, i)
CROSS JOIN LATERAL (SELECT max(seq) AS seq FROM oml.journal j WHERE j.tenant_id = a.t) m`, tenants, seqs)
	if err != nil {
		return fmt.Errorf("compare %d heads seen outside the journal with it: %w", hi-lo, err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			i              int64
			stored, dbHash []byte
			maxSeq         *int64
		)
		if err := rows.Scan(&i, &stored, &maxSeq, &dbHash); err != nil {
			return err
		}
		a := as[lo+int(i)-1]
		var dbSeq int64
		if maxSeq != nil {
			dbSeq = *maxSeq
		}
		seqsOut[lo+int(i)-1] = dbSeq
		out[lo+int(i)-1] = anchorFinding(a.tenant, a.kind, a.head, stored, dbSeq, dbHash)
		seen++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("compare %d heads seen outside the journal with it: %w", hi-lo, err)
	}
	if seen != hi-lo {
		return fmt.Errorf("compare heads seen outside the journal with it: %d answers for %d heads", seen, hi-lo)
	}
	return nil
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

// ProviderKeys verifies the provider chain alone, from its genesis, and
// returns the keys it issued before its first bad event (none if it has no
// events). Pages are read outside one snapshot: the chain is append-only,
// and a page appended meanwhile is simply read too.
func ProviderKeys(ctx context.Context, q Querier) (map[string]*Key, error) {
	keys, _, err := ProviderTrust(ctx, q)
	return keys, err
}

// ProviderTrust is ProviderKeys with the provider chain's revocations.
func ProviderTrust(ctx context.Context, q Querier) (map[string]*Key, map[string]Revocation, error) {
	return providerTrust(ctx, q, nil)
}

// ProviderTrustSinceCheckpoint is ProviderTrust on the fast path of
// VerifyDB (DBOptions.SinceCheckpoint): the provider chain is read and
// hash-checked from its genesis, but the signatures up to its stored
// checkpoint are skipped once the chain hashes to it
// (Options.ProviderSigned). For oml doctor, whose chain check re-verifies
// them within the scrub period; never for what writes.
func ProviderTrustSinceCheckpoint(ctx context.Context, q Querier) (map[string]*Key, map[string]Revocation, error) {
	var cp Head
	err := q.QueryRow(ctx, `SELECT seq, hash FROM oml.chain_checkpoints WHERE tenant_id = $1`, ProviderTenant).Scan(&cp.Seq, &cp.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return providerTrust(ctx, q, nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the provider chain's checkpoint: %w", err)
	}
	return providerTrust(ctx, q, &cp)
}

func providerTrust(ctx context.Context, q Querier, signed *Head) (map[string]*Key, map[string]Revocation, error) {
	keys, revoked, _, err := providerTrustHead(ctx, q, signed)
	return keys, revoked, err
}

// providerTrustHead is providerTrust that also returns the provider
// chain's head when the whole chain as read verified (nil when it has a
// finding or no event). The chain is streamed a page at a time and
// nothing per event outlives its check (Options.KeysOnly): with signed,
// a chain that does not reach it intact is read and verified again in
// full, never trusted on the strength of signed.
func providerTrustHead(ctx context.Context, q Querier, signed *Head) (map[string]*Key, map[string]Revocation, *Head, error) {
	keys, revoked, head, err := providerTrustRead(ctx, q, signed)
	if signed != nil && errors.Is(err, ErrProviderUnconfirmed) {
		keys, revoked, head, err = providerTrustRead(ctx, q, nil)
	}
	return keys, revoked, head, err
}

func providerTrustRead(ctx context.Context, q Querier, signed *Head) (map[string]*Key, map[string]Revocation, *Head, error) {
	src := func(yield func(*Event, error) bool) {
		ev := &Event{}
		var after int64
		for {
			n, stop, err := journalPageRead(ctx, q, ProviderTenant, after, defaultJournalPage, ev, yield, func(uuid.UUID) bool { return false })
			if err != nil {
				yield(nil, fmt.Errorf("read the provider chain: %w", err))
				return
			}
			if stop || n < defaultJournalPage {
				return
			}
			after = ev.Seq
		}
	}
	var verified atomic.Pointer[Head]
	sum, err := Verify(ctx, src, Options{ProviderSigned: signed, KeysOnly: true, OnChain: func(r ChainResult) {
		if r.Tenant == ProviderTenant && r.Finding == nil && r.Events > 0 {
			verified.Store(&Head{Seq: r.Last.Seq, Hash: bytes.Clone(r.Last.Hash)})
		}
	}})
	if err != nil {
		return nil, nil, nil, err
	}
	return sum.Keys, sum.Revocations, verified.Load(), nil
}

func journalPageRead(ctx context.Context, tx Querier, tenant uuid.UUID, after int64, page int, ev *Event,
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
// moves forward, except that a finding at or below it moves it back
// (invalidate). Its verified_at is when its whole range was last verified
// from the genesis: a chain verified from its genesis stores the run's
// start; one resumed from its checkpoint keeps the old verified_at (the
// events below it were not re-read).
type checkpointWriter struct {
	pool        *pgxpool.Pool
	off         bool
	runAt       time.Time
	stored      int
	invalidated int
	tenants     []uuid.UUID
	seqs        []int64
	hashes      [][]byte
	full        []bool
	rewinds     []rewind
}

// rewind moves tenant's checkpoint, if it is at or above seq below, back
// to head (or removes it when head is zero).
type rewind struct {
	tenant uuid.UUID
	below  int64
	head   Head
	full   bool
}

const checkpointBatch = 500

func (w *checkpointWriter) add(ctx context.Context, t uuid.UUID, h Head, full bool) error {
	if w.off || h.IsZero() {
		return nil
	}
	w.tenants = append(w.tenants, t)
	w.seqs = append(w.seqs, h.Seq)
	w.hashes = append(w.hashes, slices.Clone(h.Hash))
	w.full = append(w.full, full)
	if len(w.tenants) >= checkpointBatch {
		return w.flush(ctx)
	}
	return nil
}

// invalidate records that t's chain has its first bad event at f.Seq: a
// checkpoint at or above it must not be resumed from, so it goes back to
// the last event this run verified below f (or away).
func (w *checkpointWriter) invalidate(t *dbTenant, f *Finding) {
	if w.off || t.cp == nil || t.cp.Seq < f.Seq {
		return
	}
	var h Head
	if t.result != nil && t.result.Last.Seq >= 1 && t.result.Last.Seq < f.Seq {
		h = Head{Seq: t.result.Last.Seq, Hash: slices.Clone(t.result.Last.Hash)}
	}
	w.rewinds = append(w.rewinds, rewind{tenant: t.id, below: f.Seq, head: h, full: t.fullPass()})
}

func (w *checkpointWriter) flush(ctx context.Context) error {
	if len(w.tenants) == 0 {
		return nil
	}
	// UPDATE then INSERT rather than ON CONFLICT: the new verified_at
	// depends on whether the row's chain was verified from its genesis.
	_, err := w.pool.Exec(ctx, `
WITH t AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bytea[], $4::bool[]) AS t (tenant_id, seq, hash, full_pass)
), moved AS (
    UPDATE oml.chain_checkpoints c
    SET seq = t.seq, hash = t.hash, verified_at = CASE WHEN t.full_pass THEN $5 ELSE c.verified_at END
    FROM t WHERE c.tenant_id = t.tenant_id AND c.seq <= t.seq
)
INSERT INTO oml.chain_checkpoints (tenant_id, seq, hash, verified_at)
SELECT t.tenant_id, t.seq, t.hash, CASE WHEN t.full_pass THEN $5 ELSE now() END
FROM t WHERE NOT EXISTS (SELECT 1 FROM oml.chain_checkpoints c WHERE c.tenant_id = t.tenant_id)
ON CONFLICT (tenant_id) DO NOTHING`, w.tenants, w.seqs, w.hashes, w.full, w.runAt)
	if err != nil {
		return fmt.Errorf("store verification checkpoints: %w", err)
	}
	w.stored += len(w.tenants)
	w.tenants, w.seqs, w.hashes, w.full = w.tenants[:0], w.seqs[:0], w.hashes[:0], w.full[:0]
	return nil
}

// rewind applies the invalidations (a handful: one per broken chain).
func (w *checkpointWriter) rewind(ctx context.Context) error {
	for _, r := range w.rewinds {
		var err error
		var tag pgconn.CommandTag
		if r.head.IsZero() {
			tag, err = w.pool.Exec(ctx, `DELETE FROM oml.chain_checkpoints WHERE tenant_id = $1 AND seq >= $2`, r.tenant, r.below)
		} else {
			tag, err = w.pool.Exec(ctx, `
UPDATE oml.chain_checkpoints SET seq = $3, hash = $4, verified_at = CASE WHEN $5 THEN $6 ELSE verified_at END
WHERE tenant_id = $1 AND seq >= $2`, r.tenant, r.below, r.head.Seq, r.head.Hash, r.full, w.runAt)
		}
		if err != nil {
			return fmt.Errorf("move the checkpoint of tenant %s below its finding at seq %d: %w", r.tenant, r.below, err)
		}
		w.invalidated += int(tag.RowsAffected())
	}
	w.rewinds = w.rewinds[:0]
	return nil
}

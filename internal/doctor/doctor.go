package doctor

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakesummary"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/witness"
)

// Status is a check's verdict. The strings are part of the JSON contract.
type Status string

// The statuses, from best to worst (skipped sorts apart: it is neither
// healthy nor broken, the check could not be run and says why).
const (
	StatusOK      Status = "ok"
	StatusWarn    Status = "warn"
	StatusFail    Status = "fail"
	StatusSkipped Status = "skipped"
)

// rank orders statuses for "worst of": fail > warn > ok > skipped.
func (s Status) rank() int {
	switch s {
	case StatusFail:
		return 3
	case StatusWarn:
		return 2
	case StatusOK:
		return 1
	}
	return 0
}

// The check ids. They are stable: monitoring matches on them, and each has a
// runbook at docs/runbooks/<id>.md.
const (
	IDDatabase    = "database"
	IDLake        = "lake"
	IDLease       = "lease"
	IDLag         = "lag"
	IDHorizon     = "horizon"
	IDDeadLetters = "dead-letters"
	IDFork        = "fork"
	IDContinuity  = "continuity"
	IDChain       = "chain"
	IDDelta       = "delta"
	IDReconcile   = "reconcile"
	IDReplication = "replication"
	IDOutbox      = "outbox"
)

// Result is one check's outcome.
type Result struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status Status `json:"status"`
	// Summary is one line; for skipped it says why the check did not run.
	Summary string `json:"summary"`
	// Details are further human lines (evidence, the offending pid, ...).
	Details []string `json:"details"`
	// Data holds the check's measured values under stable snake_case keys
	// (documented per check in docs/doctor.md), for monitoring.
	Data            map[string]any `json:"data"`
	Runbook         string         `json:"runbook"`
	CheckedAt       time.Time      `json:"checked_at"`
	DurationSeconds float64        `json:"duration_seconds"`
}

// Report is one doctor run: every check, in the fixed order of Checks.
type Report struct {
	// Status is the worst check status (ok when every check is ok or skipped).
	Status          Status         `json:"status"`
	Counts          map[Status]int `json:"counts"`
	Checks          []Result       `json:"checks"`
	StartedAt       time.Time      `json:"started_at"`
	DurationSeconds float64        `json:"duration_seconds"`
}

// Check returns the result with id, if the report has it.
func (r *Report) Check(id string) (Result, bool) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c, true
		}
	}
	return Result{}, false
}

// Failed reports whether any check failed, or (strict) warned.
func (r *Report) Failed(strict bool) bool {
	return r.Counts[StatusFail] > 0 || (strict && r.Counts[StatusWarn] > 0)
}

// Thresholds decide warn and fail. Every one is a flag of oml doctor.
type Thresholds struct {
	// LagWarn/LagFail: age of the oldest outbox row not yet in the lake.
	LagWarn, LagFail time.Duration
	// BacklogWarn/BacklogFail: outbox rows above the frontier.
	BacklogWarn, BacklogFail int64
	// SeqGapWarn/SeqGapFail: outbox seqs above the frontier (rows plus the
	// seqs of rolled-back transactions: what the writer has to scan), graded
	// only while rows wait.
	SeqGapWarn, SeqGapFail int64
	// WriterDownWarn/WriterDownFail: how long rows may wait with no live
	// lake writer (no lease, or an expired one).
	WriterDownWarn, WriterDownFail time.Duration
	// HorizonWarn/HorizonFail: age of the oldest open transaction holding
	// the snapshot horizon (and so the lake) back.
	HorizonWarn, HorizonFail time.Duration
	// DeadLettersFail: dead letters at which the check fails (any warns).
	DeadLettersFail int64
	// CheckpointWarn/CheckpointFail: a Delta table's commits since its last
	// checkpoint.
	CheckpointWarn, CheckpointFail int64
	// SmallFileSize and SmallFilesWarn: a table with at least SmallFilesWarn
	// live files smaller than SmallFileSize warns (optimize is due).
	SmallFileSize  int64
	SmallFilesWarn int
	// VacuumWarn: bytes of removed files past the table's retention (vacuum
	// would delete them) at which a table warns.
	VacuumWarn int64
	// ScrubEvents: old events the chain check re-verifies per run, in whole
	// chains least recently verified in full (0: no scrub). ScrubPeriod:
	// every event should be re-verified within it; chains become due for
	// the scrub at half of it, and the check warns when the last full pass
	// is older than it.
	ScrubEvents int64
	ScrubPeriod time.Duration
	// OutboxPrunableWarn: the outbox check warns when the oldest row every
	// table has applied (what oml outbox prune would delete) is older than
	// this: prune is not running (its default retention is 7 days).
	OutboxPrunableWarn time.Duration
}

// DefaultThresholds are the documented defaults (docs/doctor.md).
func DefaultThresholds() Thresholds {
	return Thresholds{
		LagWarn: time.Minute, LagFail: 10 * time.Minute,
		BacklogWarn: 10_000, BacklogFail: 100_000,
		SeqGapWarn: 20_000, SeqGapFail: 200_000,
		WriterDownWarn: 2 * time.Minute, WriterDownFail: 15 * time.Minute,
		HorizonWarn: time.Minute, HorizonFail: 10 * time.Minute,
		DeadLettersFail: 100,
		CheckpointWarn:  200, CheckpointFail: 1000,
		SmallFileSize: 8 << 20, SmallFilesWarn: 1000,
		VacuumWarn:  1 << 30,
		ScrubEvents: 20_000, ScrubPeriod: 7 * 24 * time.Hour,
		OutboxPrunableWarn: 14 * 24 * time.Hour,
	}
}

// Validate rejects thresholds where fail comes before warn or a value is
// negative, naming the flags.
func (t Thresholds) Validate() error {
	type pair struct {
		name       string
		warn, fail int64
	}
	for _, p := range []pair{
		{"--lag-warn/--lag-fail", int64(t.LagWarn), int64(t.LagFail)},
		{"--backlog-warn/--backlog-fail", t.BacklogWarn, t.BacklogFail},
		{"--seq-gap-warn/--seq-gap-fail", t.SeqGapWarn, t.SeqGapFail},
		{"--writer-down-warn/--writer-down-fail", int64(t.WriterDownWarn), int64(t.WriterDownFail)},
		{"--horizon-warn/--horizon-fail", int64(t.HorizonWarn), int64(t.HorizonFail)},
		{"--checkpoint-warn/--checkpoint-fail", t.CheckpointWarn, t.CheckpointFail},
	} {
		if p.warn < 0 || p.fail < 0 {
			return fmt.Errorf("%s must not be negative", p.name)
		}
		if p.fail < p.warn {
			return fmt.Errorf("%s: the fail threshold must be at least the warn threshold", p.name)
		}
	}
	if t.OutboxPrunableWarn <= 0 {
		return errors.New("--outbox-prunable-warn must be positive")
	}
	if t.ScrubEvents < 0 || t.ScrubPeriod <= 0 {
		return errors.New("--scrub-events must not be negative and --scrub-period must be positive")
	}
	if t.DeadLettersFail < 1 || t.SmallFilesWarn < 1 || t.SmallFileSize < 1 || t.VacuumWarn < 1 {
		return errors.New("--dead-letters-fail, --small-files-warn, --small-file-size and --vacuum-warn must be at least 1")
	}
	return nil
}

// Options configure a run.
type Options struct {
	// DB returns the pool (opening it on first use). Required: doctor
	// without a database is a configuration error the caller reports.
	DB func(ctx context.Context) (*pgxpool.Pool, error)
	// Lake returns the lake root; nil means no lake is configured (the lake
	// checks are then skipped and say so).
	Lake func(ctx context.Context) (store.Store, error)
	// Deep adds the slow checks (reconcile).
	Deep bool
	// Thresholds decide warn/fail (zero value: DefaultThresholds).
	Thresholds *Thresholds
	// Timeout bounds each check (default 10s); a check that runs out is a
	// fail saying so.
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NoSummary reads every table's log in full, neither reading nor
	// storing the lake summary (internal/lakesummary).
	NoSummary bool
}

// run is the state of one doctor run that checks share.
type run struct {
	opts Options
	th   Thresholds
	now  func() time.Time

	pool     *pgxpool.Pool
	dbUsable bool // the database check passed: checks that can do without it ask
	lake     store.Store
	lakeErr  error

	statusOnce sync.Once
	status     *lakeStatus
	statusErr  error

	namesOnce sync.Once
	names     map[string]string

	// The lake's tables, read once for every check that reads them.
	lakeReadOnce sync.Once
	lakeRead     *lakeRead

	// The lake's continuity with the database, compared once for the
	// continuity and outbox checks.
	continuityOnce sync.Once
	pos            []lakewriter.TablePosition
	cont           lakewriter.Continuity
	contErr        error

	// summaryLoad delivers the lake summary, read beside the database
	// check (nil: the lake read reads it itself).
	summaryLoad chan *lakesummary.Loaded

	// pending are the waits for what the run writes in the background.
	pendingMu sync.Mutex
	pending   []func() string

	// readOnly: the lake summary is read, never stored (ReadLakeView).
	readOnly bool

	// trust is the provider chain's keys as the chain check verified them,
	// handed to the fork check, so a run reads the provider chain once.
	trust providerTrust
}

// providerTrust hands the chain check's verified provider keys to the fork
// check. The chain check resolves it exactly once: with the keys as soon
// as its provider chain is done (chainverify.DBOptions.OnProviderTrust),
// or empty-handed when it ends without them (an error, a timeout, a
// panic, no provider chain); the fork check then verifies the provider
// chain itself, as it did before the hand-off.
type providerTrust struct {
	once    sync.Once
	done    chan struct{}
	keys    map[string]*chainverify.Key
	revoked map[string]chainverify.Revocation
	ok      bool
}

func (p *providerTrust) set(keys map[string]*chainverify.Key, revoked map[string]chainverify.Revocation, ok bool) {
	p.once.Do(func() {
		p.keys, p.revoked, p.ok = keys, revoked, ok
		close(p.done)
	})
}

// wait returns the chain check's keys; ok is false when it had none to
// give or ctx ended first.
func (p *providerTrust) wait(ctx context.Context) (map[string]*chainverify.Key, map[string]chainverify.Revocation, bool) {
	select {
	case <-p.done:
		return p.keys, p.revoked, p.ok
	case <-ctx.Done():
		return nil, nil, false
	}
}

// keyTrust is the provider chain's keys for the fork check, resolved on
// first use: the chain check's (providerTrust), else read here
// (chainverify.ProviderTrustSinceCheckpoint).
type keyTrust struct {
	get func() (witness.KeyLookup, error)
}

// lazyTrust returns the fork check's keys, waited for or read only when
// first asked for.
func (r *run) lazyTrust(ctx context.Context) keyTrust {
	return keyTrust{get: sync.OnceValues(func() (witness.KeyLookup, error) {
		keys, revoked, ok := r.trust.wait(ctx)
		if !ok {
			var err error
			if keys, revoked, err = chainverify.ProviderTrustSinceCheckpoint(ctx, r.pool); err != nil {
				return nil, err
			}
		}
		return chainverify.KeyLookup(keys, revoked), nil
	})}
}

// lookup is the keys as a witness.KeyLookup: none is trusted when they
// could not be had (get's error, which fails the check).
func (t keyTrust) lookup(keyID string, tenant uuid.UUID, seq int64) (ed25519.PublicKey, bool) {
	l, err := t.get()
	if err != nil {
		return nil, false
	}
	return l(keyID, tenant, seq)
}

// checkDef is one check: how to run it and what it needs.
type checkDef struct {
	id, title string
	needsDB   bool // skipped when the database or its schema is not usable
	needsLake bool // skipped when no lake is configured or it cannot be opened
	deep      bool // only with --deep
	run       func(ctx context.Context, r *run, res *Result)
}

// Checks lists every check id in report order.
func Checks() []string {
	out := make([]string, 0, len(checkDefs))
	for _, c := range checkDefs {
		out = append(out, c.id)
	}
	return out
}

// Runbook is the runbook path of a check, relative to the repository root.
func Runbook(id string) string { return "docs/runbooks/" + id + ".md" }

// Run runs every check and returns the report. It never fails as a whole:
// a check that cannot run is that check's fail or skipped, with the reason.
//
// Order: the database check runs first, because every other database check
// would only repeat its failure (they are skipped, naming it); the lake is
// opened at the same time. Then all other checks run concurrently, each
// under its own timeout.
func Run(ctx context.Context, opts Options) Report {
	r := &run{opts: opts, now: opts.Now, th: DefaultThresholds(), trust: providerTrust{done: make(chan struct{})}}
	if r.now == nil {
		r.now = time.Now
	}
	if opts.Thresholds != nil {
		r.th = *opts.Thresholds
	}
	if r.opts.Timeout <= 0 {
		r.opts.Timeout = 10 * time.Second
	}
	started := r.now()
	// Every status is a key of counts, zero or not, so monitoring can read
	// counts.fail without guarding for its absence.
	rep := Report{StartedAt: started, Counts: map[Status]int{StatusOK: 0, StatusWarn: 0, StatusFail: 0, StatusSkipped: 0}}
	results := make([]Result, len(checkDefs))

	// Phase 1: database (and schema) and, concurrently, open the lake.
	var wg sync.WaitGroup
	if opts.Lake != nil {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
			defer cancel()
			r.lake, r.lakeErr = opts.Lake(lctx)
			if r.lakeErr == nil && r.lake == nil {
				r.lakeErr = errors.New("no lake store was returned")
			}
			if r.lakeErr == nil && !opts.NoSummary {
				r.preloadSummary(ctx)
			}
		})
	}
	results[0] = r.runOne(ctx, checkDefs[0])
	wg.Wait()
	dbUsable := results[0].Status == StatusOK || results[0].Status == StatusWarn
	r.dbUsable = dbUsable
	// The database check's own row carries its error; repeating a long
	// connection error in every skipped row only buries it.
	dbWhy := "skipped: needs the database, and the database check failed (see its row)"
	if p, ok := results[0].Data["pending_migrations"].([]string); ok && len(p) > 0 {
		dbWhy = "skipped: the schema is not current, migrations are pending (see the database row)"
	}

	// Phase 2: everything else, concurrently.
	chainRuns := false
	for i := 1; i < len(checkDefs); i++ {
		def := checkDefs[i]
		switch {
		case def.deep && !opts.Deep:
			results[i] = skipped(def, "not run: pass --deep for this slower check")
			continue
		case def.needsDB && !dbUsable:
			results[i] = skipped(def, dbWhy)
			continue
		case def.needsLake && opts.Lake == nil:
			results[i] = skipped(def, "no lake configured: pass --lake or set OML_LAKE_URL")
			continue
		case def.needsLake && r.lakeErr != nil:
			results[i] = skipped(def, "the lake could not be opened: "+r.lakeErr.Error())
			continue
		}
		chainRuns = chainRuns || def.id == IDChain
		wg.Go(func() { results[i] = r.runOne(ctx, def) })
	}
	if !chainRuns {
		r.trust.set(nil, nil, false) // nobody else will: the fork check reads the provider chain itself
	}
	wg.Wait()
	r.waitPending()

	for i, res := range results {
		if res.CheckedAt.IsZero() { // skipped: "checked" now, so its age reads right
			results[i].CheckedAt = started
		}
		rep.Counts[res.Status]++
		if res.Status.rank() > rep.Status.rank() {
			rep.Status = res.Status
		}
	}
	if rep.Status == StatusSkipped || rep.Status == "" {
		rep.Status = StatusOK
	}
	rep.Checks = results
	rep.DurationSeconds = r.now().Sub(started).Seconds()
	return rep
}

func newResult(def checkDef) Result {
	return Result{ID: def.id, Title: def.title, Runbook: Runbook(def.id), Details: []string{}, Data: map[string]any{}}
}

func skipped(def checkDef, why string) Result {
	res := newResult(def)
	res.Status, res.Summary = StatusSkipped, why
	return res
}

// runOne runs one check under its timeout. A check that panics or outlives
// its timeout is a fail that says so; doctor itself carries on.
func (r *run) runOne(ctx context.Context, def checkDef) Result {
	start := r.now()
	cctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	done := make(chan Result, 1) // buffered: a check that outlives us can still finish
	go func() {
		res := newResult(def)
		defer func() {
			if p := recover(); p != nil {
				res.Status = StatusFail
				res.Summary = fmt.Sprintf("the check crashed: %v (a bug in oml doctor; please report it)", p)
				res.Details = append(res.Details, string(debug.Stack()))
			}
			done <- res
		}()
		def.run(cctx, r, &res)
		if res.Status == "" {
			res.Status = StatusOK
		}
	}()
	var res Result
	select {
	case res = <-done:
	case <-cctx.Done():
		res = newResult(def)
		res.Status = StatusFail
		if ctx.Err() != nil {
			res.Summary = "interrupted before the check finished"
		} else {
			res.Summary = fmt.Sprintf("the check did not finish within %s (--timeout): the database or the lake is too slow to answer", r.opts.Timeout)
		}
	}
	res.CheckedAt = start
	res.DurationSeconds = r.now().Sub(start).Seconds()
	return res
}

// fail marks res failed with a one-line summary built from err when the
// check could not do its own work (a query that errored).
func (res *Result) fail(format string, args ...any) {
	res.Status = StatusFail
	res.Summary = fmt.Sprintf(format, args...)
}

// raise moves res to s if s is worse.
func (res *Result) raise(s Status) {
	if s.rank() > res.Status.rank() {
		res.Status = s
	}
}

func (res *Result) detail(format string, args ...any) {
	res.Details = append(res.Details, fmt.Sprintf(format, args...))
}

// grade returns fail, warn or ok for a value against its thresholds
// (reaching a threshold counts).
func grade[T int64 | time.Duration | int](v, warn, fail T) Status {
	switch {
	case v >= fail:
		return StatusFail
	case v >= warn:
		return StatusWarn
	}
	return StatusOK
}

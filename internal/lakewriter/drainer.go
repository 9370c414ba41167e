package lakewriter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

// CrashPoint names a step of the drain protocol. Tests stop the writer there
// as if the process had died, restart it and check that nothing was lost or
// duplicated.
type CrashPoint string

// The crash points, in protocol order.
const (
	AfterDataFiles       CrashPoint = "after-data-files"       // a table's data files are written, not committed
	AfterTableCommit     CrashPoint = "after-table-commit"     // one table of the batch has committed
	BeforeFrontierUpdate CrashPoint = "before-frontier-update" // every table committed, frontier not advanced
	AfterFrontierUpdate  CrashPoint = "after-frontier-update"
	MidDeadLetter        CrashPoint = "mid-dead-letter" // the attempt is counted, the row not yet dead-lettered
)

// ErrCrashed is returned when a crash hook stopped the writer.
var ErrCrashed = errors.New("lake writer stopped at a crash point")

// Options configure a Drainer.
type Options struct {
	DB   *pgxpool.Pool
	Lake store.Store
	// Signer journals materialize.skipped when a poison row is dead-lettered.
	// Without one, a poison row past its budget stops the drain with an error.
	Signer chain.Signer
	// Limits bound a batch when it is first cut (defaults: 10,000 rows, 64 MiB).
	Limits outbox.Limits
	// MaxWait is how long the loop lets a small backlog wait for more rows
	// before cutting a batch smaller than the limits (default 1s).
	MaxWait time.Duration
	// Poll is the loop's idle polling interval (default 250ms).
	Poll time.Duration
	// PoisonBudget is how many batch attempts a poison row may fail before it
	// is dead-lettered (default 5).
	PoisonBudget int
	// Parallel bounds the tables committed at once, and opened at once at
	// start (default: what suits the store, store.Concurrency — a few on
	// a local disk, many on S3).
	Parallel int
	// MaxOpenTables bounds the Delta table writers kept open between
	// batches (default DefaultMaxOpenTables; registry.go says why and what
	// a reopen costs). Negative: no bound.
	MaxOpenTables int
	// OpenTablesBytes bounds the estimated memory of the open writers'
	// snapshots (delta.Snapshot.ApproxBytes) as well: the least recently
	// used are closed first. 0: only MaxOpenTables bounds them
	// (`oml lake drain --memory` sets it, OpenTablesShare of the budget).
	OpenTablesBytes int64
	// MergeRowsBytes bounds the rows of the data files MERGEs wrote that
	// are kept for the next MERGE of their table (mergerows.go; default
	// DefaultMemory / MergeRowsShare, `oml lake drain --memory` sets it to
	// MergeRowsShare of the budget). Negative: none kept.
	MergeRowsBytes int64
	// BackoffMin/Max bound the wait between retries after an outage or a
	// poison row (defaults 200ms / 30s).
	BackoffMin, BackoffMax time.Duration
	// HorizonTimeout is how long DrainOnce waits for the snapshot horizon to
	// pass its fence before giving up with the rows it has (default 60s).
	HorizonTimeout time.Duration
	// MaxOutage is how long DrainOnce retries through an outage before it
	// returns an *OutageError (default DefaultMaxOutage). The long-running
	// loop waits out any outage.
	MaxOutage time.Duration
	// CheckpointInterval is the Delta auto-checkpoint policy (commits since
	// the last checkpoint; default: the table's, else 100).
	CheckpointInterval int
	// Lease settings; NoLease turns the lease off (tests of the Delta fence).
	LeaseTTL time.Duration
	NoLease  bool
	Holder   string // default host:pid:random
	Log      *slog.Logger
	Metrics  *Metrics
	// Crash, when set, is called at every crash point; a non-nil error stops
	// the writer on the spot (tests only).
	Crash func(p CrashPoint, table tables.TableKey) error
	// OnBatch, when set, is called after each completed batch (tests).
	OnBatch func(BatchResult)
	// StopAt, when positive, caps DrainOnce's target at this outbox seq
	// (benchmarks and staged catch-ups); the cap falls on a batch boundary.
	StopAt int64
	// NoForkCheck skips the fork check against the witnessed heads (which
	// otherwise runs at start and every ForkCheckInterval, default 1m).
	NoForkCheck       bool
	ForkCheckInterval time.Duration
	// ContinuityRecheck is how often the long-running loop checks again
	// after refusing to write because the lake is ahead of or diverged from
	// the database (default 30s).
	ContinuityRecheck time.Duration
	// WitnessInterval is how often, at most, a tenant's chain head is
	// published as a signed witness after a batch touched it (default 10s;
	// needs Signer; negative turns publishing off).
	WitnessInterval time.Duration
	// Durable is which streaming standbys must have flushed the WAL of a
	// stable prefix before a batch is cut from it, and of a chain head
	// before it is witnessed (--durable-on; the zero value is
	// replication.DefaultPolicy, auto).
	Durable replication.Policy
	// DurableTimeout is how long DrainOnce waits for the standbys before it
	// gives up for this run with the rows it has (default 60s). The witness
	// publisher waits at most min(DurableTimeout, 5s) after a batch.
	DurableTimeout time.Duration
}

// BatchResult describes one completed batch.
type BatchResult struct {
	Start, End   int64
	Rows         int // outbox rows read (not counting dead-lettered ones)
	Tables       int // tables committed
	Skipped      int // tables that already held the batch
	DeadLettered []int64
	Held         int // rows of tenants held for a forked chain, not applied
	Duration     time.Duration
	// Phases is where the batch's time went, on the drain's goroutine.
	Phases BatchPhases

	touched []tables.TableKey
}

// BatchPhases is where one batch's time went on the drain's goroutine
// (benchmarks and traces read it): the continuity check before it, the
// wait for the rows read ahead, the read of its rows when nothing usable
// was read ahead, its table commits, and the frontier's update.
type BatchPhases struct {
	Check, AheadWait, Read, Apply, Frontier time.Duration
	// FromAhead: the batch's rows came from the read ahead (prefetch.go).
	FromAhead bool
}

// Summary is what a DrainOnce run did.
type Summary struct {
	StartFrontier int64   `json:"start_frontier"`
	EndFrontier   int64   `json:"end_frontier"`
	Target        int64   `json:"target"` // the stable prefix drained to
	Batches       int     `json:"batches"`
	Rows          int     `json:"rows"`
	TableCommits  int     `json:"table_commits"`
	DeadLettered  []int64 `json:"dead_lettered"`
	// Replayed is the newest recorded batch, re-run at start with its
	// recorded bounds (nil when there was none to re-run). Its rows are not
	// in Rows, which counts only rows new to the lake; when the batch was in
	// every table already (the usual case) it committed nothing.
	Replayed *BatchResult  `json:"-"`
	Duration time.Duration `json:"duration_ns"`
	// RecoverDuration is the part of Duration spent before the first new
	// batch: the fork check, reading every table's log, replaying the
	// newest batch and catching tables up.
	RecoverDuration time.Duration    `json:"recover_duration_ns"`
	HorizonHeld     bool             `json:"horizon_held"` // the horizon did not pass the fence in time
	Blockers        []outbox.Blocker `json:"blockers,omitempty"`
	// DurabilityHeld: the required standbys did not flush the stable prefix
	// within DurableTimeout; Durability says which standby, how far behind.
	// With HorizonHeld too, the standbys were read once (no wait) at the WAL
	// position covering every commit so far: both facts are reported.
	DurabilityHeld bool                 `json:"durability_held"`
	Durability     *replication.Verdict `json:"durability,omitempty"`
	// Refused lists tenants not materialized because their chain is forked
	// or lost its tail (the fork check against the witnessed heads).
	Refused []chainverify.Finding `json:"refused"`
	// HeldTables lists the tables not written because of a fault of their
	// own (faults.go); every other table was drained.
	HeldTables []TableHold `json:"held_tables"`
}

// Drainer is the lake writer.
type Drainer struct {
	opts   Options
	db     *pgxpool.Pool
	log    *slog.Logger
	tables *registry
	lease  *lease
	// mergeRows keeps the rows of the files MERGEs wrote (mergerows.go).
	mergeRows *mergeRows
	// workareasByFile merges every gold/workareas table file by file, as
	// before small ones were rewritten whole (mergesWhole; benchmarks
	// and tests compare the two).
	workareasByFile bool
	chk             *rowChecker // the row check's memory of verified tenants

	frontier  atomic.Int64 // the position the Delta logs say is applied
	recovered bool
	// finalXid is the xid of the newest fence the snapshot horizon was seen
	// to pass: every outbox row at or below that fence's seq is final. The
	// frontier cache records it as horizon_xid (0: none yet, keep the old).
	finalXid atomic.Uint64

	heldMu        sync.Mutex
	held          map[uuid.UUID]chainverify.Finding
	heldTables    map[tables.TableKey]TableHold // tables held for a fault of their own (faults.go)
	outageLimit   time.Duration                 // DrainOnce: give up on an outage after this (0: never)
	lastForkCheck time.Time
	// heldDuringCheck collects the tenants publications held while the
	// fork check beside the batches ran (nil when none runs): its result,
	// read before, must not release them (forkrecheck.go).
	heldDuringCheck map[uuid.UUID]chainverify.Finding
	recheck         *forkRecheck // the fork check beside the batches, if one runs (the loop's goroutine only)
	onForkRecheck   func()       // tests: called by that check after its read
	// bronzeSeen is the newest bronze event of each tenant this writer has
	// read or committed, the periodic fork check's bronze anchors
	// (bronzeheads.go); lastFullForkRead is when a fork check last read
	// every one of them from the lake.
	bronzeSeen       bronzeHeads
	lastFullForkRead time.Time
	// forkReads and forkReadNanos count the periodic checks' reads and
	// their time (benchmarks).
	forkReads, forkReadNanos atomic.Int64
	replayed                 *BatchResult // the batch recover replayed, if any (for DrainOnce's summary)
	startScan                *tableScan   // while recover replays the newest batch: the start-up scan
	deadMu                   sync.Mutex

	// The witness publisher (witness.go): when each tenant was last
	// witnessed, the tenants touched since, the publication in flight.
	witnessMu      sync.Mutex
	witnessedAt    map[uuid.UUID]time.Time
	witnessPending map[uuid.UUID]struct{}
	witnessRun     *witnessRun
	witnessPub     *witness.Publisher // remembers the witness it put last per tenant
	// providerTrust verifies the provider chain's signatures once per
	// process, then only those past the head it verified (the fork checks
	// and every witness publication read the keys).
	providerTrust chainverify.ProviderTrustCache

	// complete is the tables known to hold every live row of theirs up to
	// the frontier (complete.go): they skip the probe for missed rows.
	completeMu sync.Mutex
	complete   tableVersions // per tenant (tablerecords.go)

	// Continuity (continuity.go): the identity the last full check found,
	// the anchor of the newest batch known to agree, and the record of the
	// batch being applied.
	contMu     sync.Mutex
	verified   Identity
	lastAnchor *tables.Anchor
	current    *tables.BatchBounds
	cutRows    *tables.BatchBounds // Start, End and Rows of the batch last cut

	// Read-ahead (prefetch.go): the next batch read while this one
	// commits; pipeEpoch counts the changes that void a read ahead.
	pipe       *pipeline
	pipeEpoch  atomic.Uint64
	onPrefetch func(from, to int64, err error) // tests

	onWitnessCapture func(due, heads int) // tests: the heads a publication read

	durableMu        sync.Mutex
	lastVerdict      *replication.Verdict
	durableWaitSince time.Time // the loop: when the current wait for standbys began
	durableLoggedAt  time.Time
}

// New checks the options and returns a Drainer. It does not touch the
// database or the lake yet.
func New(opts Options) (*Drainer, error) {
	if opts.DB == nil || opts.Lake == nil {
		return nil, errors.New("lake writer: a database pool and a lake store are required")
	}
	if opts.Limits.Rows <= 0 {
		opts.Limits.Rows = DefaultBatchRows
	}
	if opts.Limits.Bytes <= 0 {
		opts.Limits.Bytes = DefaultBatchBytes
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.PoisonBudget <= 0 {
		opts.PoisonBudget = DefaultPoisonBudget
	}
	if opts.MaxOpenTables == 0 {
		opts.MaxOpenTables = DefaultMaxOpenTables
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = DefaultBackoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	if opts.HorizonTimeout <= 0 {
		opts.HorizonTimeout = DefaultHorizonTimeout
	}
	if opts.MaxOutage <= 0 {
		opts.MaxOutage = DefaultMaxOutage
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.Holder == "" {
		host, _ := os.Hostname()
		opts.Holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.ForkCheckInterval <= 0 {
		opts.ForkCheckInterval = DefaultForkCheckInterval
	}
	if opts.ContinuityRecheck <= 0 {
		opts.ContinuityRecheck = DefaultContinuityRecheck
	}
	if opts.DurableTimeout <= 0 {
		opts.DurableTimeout = DefaultDurableTimeout
	}
	if opts.WitnessInterval == 0 {
		opts.WitnessInterval = DefaultWitnessInterval
	}
	d := &Drainer{
		opts:       opts,
		db:         opts.DB,
		log:        opts.Log,
		tables:     newRegistry(opts.Lake, registryOptions{Delta: delta.Options{CheckpointInterval: opts.CheckpointInterval}, Lean: true, MaxOpen: opts.MaxOpenTables}),
		chk:        newRowChecker(),
		witnessPub: witness.NewPublisher(opts.Lake),
	}
	d.tables.setBudget(opts.OpenTablesBytes)
	if opts.MergeRowsBytes == 0 {
		opts.MergeRowsBytes = DefaultMemory / MergeRowsShare
	}
	d.mergeRows = newMergeRows(opts.MergeRowsBytes)
	if !opts.NoLease {
		d.lease = newLease(opts.DB, opts.Holder, opts.LeaseTTL)
	}
	return d, nil
}

func deltaOptions() delta.Options { return delta.Options{} }

func (d *Drainer) crash(p CrashPoint, key tables.TableKey) error {
	if d.opts.Crash == nil {
		return nil
	}
	if err := d.opts.Crash(p, key); err != nil {
		return fmt.Errorf("%w: %s (%s): %v", ErrCrashed, p, key, err)
	}
	return nil
}

// Frontier is the position up to which the lake holds the outbox.
func (d *Drainer) Frontier() int64 { return d.frontier.Load() }

// recover finds where the lake is from the Delta logs (the authority) and
// replays the last recorded batch with its recorded bounds, so a batch a
// crash interrupted between table commits is finished exactly as it was
// cut. The frontier cache is consulted only to report a disagreement.
func (d *Drainer) recover(ctx context.Context) error {
	if d.recovered {
		return nil
	}
	d.resetComplete()
	if _, err := d.recheckHeldTables(ctx); err != nil {
		return err
	}
	tenants, err := d.tenants(ctx)
	if err != nil {
		return err
	}
	// One read of every table (scan.go) serves the fork check, finding
	// the newest batch, the continuity check and the catch-up.
	scan, err := d.scanTables(ctx, tenants, scanOptions{BronzeHeads: !d.opts.NoForkCheck})
	if err != nil {
		return err
	}
	if err := d.checkForks(ctx, scan); err != nil {
		return err
	}
	var (
		maxEnd  int64 = 0
		maxKey  tables.TableKey
		haveAny bool
	)
	for _, t := range tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: t, Kind: k}
			if s := scan.get(key); s != nil && s.hasTxn && s.txn > maxEnd && !d.isHeldTable(key) {
				maxEnd, maxKey, haveAny = s.txn, key, true
			}
		}
	}
	// Before anything is written: does the database still hold what the
	// lake says it drained?
	if err := d.checkContinuity(ctx, tenants, scan); err != nil {
		return err
	}
	cache, missing, err := readFrontier(ctx, d.db)
	if err != nil {
		return err
	}
	if missing {
		d.log.Warn("the frontier cache row oml.lake_frontier was missing (deleted by hand?); recreating it from the lake, the authority")
	}
	if !haveAny {
		if cache > 0 {
			d.log.Warn("the lake holds no lake-writer commits but the frontier cache says it is at a later position; re-deriving from the lake (the authority)",
				"frontier_cache", cache)
		}
		d.frontier.Store(0)
		if missing {
			if err := writeFrontier(ctx, d.db, 0, 0, 0); err != nil {
				return err
			}
		}
		d.recovered = true
		return d.catchUp(ctx, tenants, scan)
	}
	start, rec, err := d.batchStart(ctx, maxKey, maxEnd, scan.get(maxKey).rec)
	if err != nil {
		return err
	}
	d.batchApplied(rec)
	if cache > maxEnd {
		d.log.Info("frontier cache is ahead of the newest lake commit; resuming from the lake (rows in between produced no commit or will be re-checked)",
			"frontier_cache", cache, "lake", maxEnd)
	}
	if start >= 0 && start < maxEnd {
		// Routine on every start: only a replay that re-applied something
		// (a batch a crash left half-committed) is worth an INFO line.
		d.log.Debug("replaying the newest recorded batch with its recorded bounds", "start", start, "end", maxEnd)
		d.setCutRows(start, maxEnd, rec.Rows)
		// The tables the scan saw at or past the batch skip it without
		// being opened again (a writer kept open would tell the same).
		d.startScan = scan
		r, err := d.processBatch(ctx, start, maxEnd)
		d.startScan = nil
		d.replayed = &r
		if err != nil {
			return fmt.Errorf("replay batch (%d, %d]: %w", start, maxEnd, err)
		}
		if r.Tables > 0 {
			d.log.Info("re-applied the newest recorded batch to the tables an interrupted run had not committed it to",
				"start", start, "end", maxEnd, "tables", r.Tables, "rows", r.Rows)
		} else {
			d.log.Debug("the newest recorded batch was already in every table", "start", start, "end", maxEnd)
		}
	}
	d.frontier.Store(maxEnd)
	if err := writeFrontier(ctx, d.db, start, maxEnd, d.finalXid.Load()); err != nil {
		return err
	}
	d.recovered = true
	return d.catchUp(ctx, tenants, scan)
}

// batchStart reads the start bound recorded with the commit that set the
// table's txn version to end (-1 if it cannot be found, e.g. cleaned up).
// The record is returned too (its anchor seeds the per-batch check).
func (d *Drainer) batchStart(ctx context.Context, key tables.TableKey, end int64, known *foundRecord) (int64, tables.BatchBounds, error) {
	if b := known; b != nil && b.ok && b.rec.End == end && !b.rec.CatchUp {
		return b.rec.Start, b.rec, nil // the scan read that commit
	}
	st, err := key.Store(d.opts.Lake)
	if err != nil {
		return -1, tables.BatchBounds{}, err
	}
	hist, err := delta.History(ctx, st, delta.HistoryOptions{Limit: 20})
	if err != nil {
		return -1, tables.BatchBounds{}, fmt.Errorf("read the history of %s: %w", key, err)
	}
	for _, h := range hist {
		for _, t := range h.Txns {
			if t.AppID == tables.AppID && t.Version == end {
				if b, ok := tables.ParseBatchBounds(h.CommitInfo); ok && b.End == end && !b.CatchUp {
					return b.Start, b, nil
				}
			}
		}
	}
	return -1, tables.BatchBounds{}, nil
}

func (d *Drainer) tenants(ctx context.Context) ([]uuid.UUID, error) {
	ids, err := tenant.IDs(ctx, d.db)
	if err != nil {
		return nil, err
	}
	return tenant.ByID(ids), nil
}

// errPoisonRetry means the batch hit poison rows still inside their budget.
var errPoisonRetry = errors.New("poison rows inside their retry budget")

// processBatch applies (from, to] to every table it touches, then advances
// the frontier cache.
func (d *Drainer) processBatch(ctx context.Context, from, to int64) (BatchResult, error) {
	var ph BatchPhases
	t := time.Now()
	rec, id, moved, err := d.checkBatch(ctx, from, to)
	ph.Check = time.Since(t)
	if err != nil {
		return BatchResult{Start: from, End: to}, err
	}
	// The rows read ahead, if they may be committed (prefetch.go), and
	// the next batch read while this one commits.
	t = time.Now()
	ahead, recut := d.takeAhead(ctx, from, to, rec, id, moved)
	ph.AheadWait, ph.FromAhead = time.Since(t), ahead != nil
	if recut {
		return BatchResult{Start: from, End: to}, errRecut
	}
	d.readAhead(to, rec.Anchor)
	d.setRecord(rec)
	res, err := d.applyRange(ctx, from, to, nil, ahead)
	ph.Read, ph.Apply = res.Phases.Read, res.Phases.Apply
	res.Phases = ph
	if err != nil {
		return res, err
	}
	if err := d.crash(BeforeFrontierUpdate, tables.TableKey{}); err != nil {
		return res, err
	}
	t = time.Now()
	err = writeFrontier(ctx, d.db, from, to, d.finalXid.Load())
	res.Phases.Frontier = time.Since(t)
	if err != nil {
		return res, err
	}
	d.frontier.Store(to)
	d.batchApplied(rec)
	if err := d.crash(AfterFrontierUpdate, tables.TableKey{}); err != nil {
		return res, err
	}
	d.opts.Metrics.batchDone(res)
	d.witnessInBackground(ctx, res.touched) // witness.go: the next batch does not wait for it
	if d.opts.OnBatch != nil {
		d.opts.OnBatch(res)
	}
	return res, nil
}

// applyRange applies the rows of (from, to] — every table's, or only
// scope's (a catch-up) — to the lake, handling poison rows, and leaves the
// frontier alone. Rows of tenants held for a forked chain are not applied.
//
// ahead, when set, is the batch's rows read ahead (prefetch.go), used in
// place of the first read.
func (d *Drainer) applyRange(ctx context.Context, from, to int64, scope *tables.TableKey, ahead []*item) (BatchResult, error) {
	started := time.Now()
	res := BatchResult{Start: from, End: to}
	if scope != nil {
		// A catch-up commit records its range like a batch does.
		rec, _, _, err := readBatchRecord(ctx, d.db, from, to, nil)
		if err != nil {
			return res, err
		}
		d.setRecord(rec)
	}
	for round := 0; ; round++ {
		items := ahead
		ahead = nil
		if items == nil {
			var err error
			t := time.Now()
			items, err = d.readRange(ctx, from, to, scope)
			res.Phases.Read += time.Since(t)
			if err != nil {
				return res, err
			}
		}
		items, res.Held = d.dropHeld(items)
		res.Rows = len(items)
		order, parts := group(items)
		res.touched = order
		t := time.Now()
		results, err := d.applyAll(ctx, order, parts, from, to, scope != nil)
		res.Phases.Apply += time.Since(t)
		if err != nil {
			return res, err
		}
		var poison []*item
		res.Tables, res.Skipped = 0, 0
		for _, r := range results {
			if r.committed >= 0 {
				res.Tables++
				d.opts.Metrics.tableCommitted(r)
			}
			if r.skipped {
				res.Skipped++
			}
			res.Held += r.held
			poison = append(poison, r.poison...)
		}
		if len(poison) == 0 {
			break
		}
		dead, err := d.handlePoison(ctx, poison)
		d.stateChanged() // dead letters change the next batch's row check
		res.DeadLettered = append(res.DeadLettered, dead...)
		if err != nil {
			return res, err // errPoisonRetry: some rows are still inside their budget
		}
		// Every poison row is dead-lettered and now left out: apply the rest.
	}
	res.Duration = time.Since(started)
	return res, nil
}

// group splits a batch's items by table, in first-seen order: parts[i]
// are order[i]'s rows, in seq order.
func group(items []*item) (order []tables.TableKey, parts [][]*item) {
	index := map[tables.TableKey]int{}
	for _, it := range items {
		i, ok := index[it.table]
		if !ok {
			i = len(order)
			index[it.table] = i
			order = append(order, it.table)
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], it)
	}
	return order, parts
}

// applyAll applies every table's part of the batch, parallel() tables at a
// time (a few on a local disk, many on S3: store.Concurrency). Each table's
// rows are applied by one goroutine, in seq order; the caller advances the
// frontier only after every table returned. An infrastructure error from
// any table fails the batch (after the others finished: what they
// committed stays committed and is skipped on the retry), so the group
// carries no cancelling context.
//
// A table's rows are let go of (parts[i] = nil) once it is applied, so the
// batch being committed shrinks while the next one is read ahead
// (prefetch.go) instead of staying whole until its last table commits;
// a retry reads the batch again.
func (d *Drainer) applyAll(ctx context.Context, order []tables.TableKey, parts [][]*item, from, to int64, catchUp bool) ([]tableResult, error) {
	results := make([]tableResult, len(order))
	errs := make([]error, len(order))
	var g errgroup.Group
	g.SetLimit(d.parallel())
	for i, key := range order {
		g.Go(func() error {
			items := parts[i]
			parts[i] = nil
			r, err := d.applyTable(ctx, key, items, from, to, catchUp)
			if err == nil && r.committed >= 0 {
				err = d.crash(AfterTableCommit, key)
			}
			results[i], errs[i] = r, err
			return nil
		})
	}
	_ = g.Wait() // every error is in errs
	var crashed error
	for _, err := range errs {
		if errors.Is(err, ErrCrashed) {
			crashed = err
		}
	}
	if crashed != nil {
		return nil, crashed
	}
	// A table's own fault holds that table; the batch goes on without it
	// (the table catches up once it reads again).
	for i, err := range errs {
		if err != nil && classify(err) == faultTable {
			d.holdTable(ctx, order[i], err)
			results[i], errs[i] = tableResult{key: order[i], committed: -1}, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// In the order of the tables' paths (TableKey.String), compared without
	// building them: two strings per comparison were about 18 MB of garbage
	// per 7,000-table batch, allocated while the collector ran and so held
	// through its cycle.
	sort.Slice(results, func(i, j int) bool { return compareKeys(results[i].key, results[j].key) < 0 })
	return results, nil
}

// compareKeys orders table keys as their paths order: a lowercase hex
// UUID with its dashes at fixed places orders as its bytes do, then the
// kind's directory.
func compareKeys(a, b tables.TableKey) int {
	if c := bytes.Compare(a.Tenant[:], b.Tenant[:]); c != 0 {
		return c
	}
	return strings.Compare(a.Kind.Dir(), b.Kind.Dir())
}

func (d *Drainer) maybeCheckpoint(ctx context.Context, w *delta.Writer, key tables.TableKey) {
	done, res, err := w.MaybeCheckpoint(ctx)
	if err != nil {
		// A failed checkpoint costs read speed, never correctness: the next
		// commit tries again.
		d.log.Warn("Delta checkpoint failed; will retry after the next commit", "table", key.String(), "error", err)
		return
	}
	if done {
		d.opts.Metrics.checkpoint()
		d.log.Info("Delta checkpoint written", "table", key.String(), "version", res.Version)
	}
}

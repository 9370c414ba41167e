package lakerepair

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/tenant"
)

// Class names what a table plan repairs. Diverged is the continuity
// check's finding (the table holds rows of a history the database does not
// have); the others are oml reconcile's classes (docs/reconcile.md).
type Class string

// The classes repair knows.
const (
	Diverged Class = "diverged"
)

// Actions a table plan takes.
const (
	ActionRewind  = "rewind"
	ActionRebuild = "rebuild"
)

// Operation is commitInfo.operation of every repair commit.
const Operation = "OML REPAIR"

// CrashPoint names a step of a run, for crash-injection tests.
type CrashPoint string

// The crash points.
const (
	AfterArchive  CrashPoint = "after-archive"  // a table's archive written, its commit not made
	AfterTable    CrashPoint = "after-table"    // a table's repair committed
	BeforeJournal CrashPoint = "before-journal" // every table committed, nothing journalled
)

// ErrCrashed wraps an injected crash.
var ErrCrashed = errors.New("injected crash")

// Options select what Run does.
type Options struct {
	Pool *pgxpool.Pool
	Lake store.Store
	// Signer journals lake.repaired (the deployment key); not needed for
	// DryRun.
	Signer chain.Signer
	// Tenant and Kind narrow the run (nil / "": every tenant, every table).
	Tenant *uuid.UUID
	Kind   tables.Kind
	// Classes narrows the run to these classes (empty: every class).
	Classes []Class
	// DryRun computes and returns the plan and changes nothing.
	DryRun bool
	// By is who repairs (journalled).
	By string
	// Holder names this run in the lake writer lease (default
	// "oml-lake-repair:host:pid"); LeaseTTL is its TTL (0: 30 s) and
	// LeaseWait how long to wait for a drain to let go of it (0: none).
	Holder    string
	LeaseTTL  time.Duration
	LeaseWait time.Duration
	// NoLease skips the lease (tests that hold it themselves).
	NoLease bool
	// Crash, when set, is called at each crash point; a non-nil error
	// stops the run there (tests).
	Crash func(p CrashPoint, table string) error
}

func (o Options) wants(c Class) bool {
	if len(o.Classes) == 0 {
		return true
	}
	for _, x := range o.Classes {
		if x == c {
			return true
		}
	}
	return false
}

func wantsRows(o Options) bool {
	for _, c := range RowClasses {
		if o.wants(c) {
			return true
		}
	}
	return false
}

func (o Options) inScope(key tables.TableKey) bool {
	return (o.Tenant == nil || *o.Tenant == key.Tenant) && (o.Kind == "" || o.Kind == key.Kind)
}

func (o Options) crash(p CrashPoint, table string) error {
	if o.Crash == nil {
		return nil
	}
	if err := o.Crash(p, table); err != nil {
		return fmt.Errorf("%w at %s (%s): %v", ErrCrashed, p, table, err)
	}
	return nil
}

// TablePlan is what a run does to one table.
type TablePlan struct {
	Tenant     uuid.UUID        `json:"tenant_id"`
	TenantName string           `json:"tenant"`
	Table      string           `json:"table"` // bronze.events | silver.claims | gold.lineage
	Path       string           `json:"path"`  // <tenant_id>/bronze/events
	Action     string           `json:"action"`
	Classes    map[string]int64 `json:"classes"`
	// ReadVersion is the Delta version the plan was computed at (the
	// repair commit is ReadVersion+1); TxnVersion the lake-writer txn
	// version there.
	ReadVersion int64 `json:"read_version"`
	TxnVersion  int64 `json:"txn_version"`
	// TargetTxnVersion is the txn version after the repair; RestoreVersion
	// the Delta version a rewind restores (-1 for a rebuild).
	TargetTxnVersion int64  `json:"target_txn_version"`
	RestoreVersion   int64  `json:"restore_version"`
	RemoveFiles      int    `json:"remove_files"`
	ReaddFiles       int    `json:"readd_files"`
	Detail           string `json:"detail"`
	// Breach counts never-promoted claims (ciphertext that must never have
	// reached the lake) the repair removes; the replaced files keep it
	// until vacuum.
	Breach int64 `json:"containment_breach,omitempty"`

	key     tables.TableKey
	removes []*delta.Add
	readds  []*delta.Add
	record  json.RawMessage // the omlBatch of the restored txn version
	rewrite []*delta.Add    // row-level: files rewritten without the affected keys
	rows    *rowWork        // row-level: what the findings said
	// restored is the snapshot a rewind restores (its files are re-added
	// from it); erase nulls erased claims' bodies in what the repair
	// writes and archives (erasure.go).
	restored *delta.Snapshot
	erase    *eraser
}

// Skipped is a table or finding the plan leaves alone, and why.
type Skipped struct {
	Tenant  uuid.UUID `json:"tenant_id"`
	Table   string    `json:"table,omitempty"`
	Class   string    `json:"class"`
	Count   int64     `json:"count"`
	Reason  string    `json:"reason"`
	Command string    `json:"command,omitempty"` // what handles it
}

// Plan is what a run found and will do.
type Plan struct {
	Digest string `json:"plan_digest"`
	// Continuity is the continuity check the plan was computed from.
	Continuity lakewriter.Continuity `json:"continuity"`
	Tables     []TablePlan           `json:"tables"`
	// NotRepaired lists what is out of this command's reach (each with
	// the command that handles it); it makes the run exit 1.
	NotRepaired []Skipped `json:"not_repaired"`
	// Pending lists rows the next `oml lake drain` puts back by itself (a
	// table behind the frontier, after a rewind or rebuild): not a
	// failure, the next step.
	Pending []Skipped `json:"pending_drain"`
}

// TableResult is one table's repair as committed.
type TableResult struct {
	Path         string `json:"path"`
	Action       string `json:"action"`
	DeltaVersion int64  `json:"delta_version"`
	TxnVersion   int64  `json:"txn_version"`
	RowsArchived int64  `json:"rows_archived"`
	Archive      string `json:"archive"` // manifest key under the lake root
}

// Journalled is one lake.repaired event a run appended.
type Journalled struct {
	Tenant uuid.UUID `json:"tenant_id"`
	Seq    int64     `json:"seq"`
	Tables int       `json:"tables"`
}

// Result is what a run did.
type Result struct {
	Plan      Plan          `json:"plan"`
	DryRun    bool          `json:"dry_run"`
	Repaired  []TableResult `json:"repaired"`
	Journal   []Journalled  `json:"journal"`
	Archive   string        `json:"archive"` // the archive root under the lake
	Remaining int           `json:"remaining"`
}

// Nothing reports whether the run found nothing to do at all.
func (r *Result) Nothing() bool {
	return len(r.Plan.Tables) == 0 && len(r.Plan.NotRepaired) == 0 && len(r.Journal) == 0
}

// ArchiveRoot is the archive's directory under the lake root.
const ArchiveRoot = "_oml_repair"

// Run computes the plan and, unless DryRun, carries it out (package doc).
func Run(ctx context.Context, opts Options) (*Result, error) {
	if !opts.DryRun && opts.Signer == nil {
		return nil, errors.New("a repair journals lake.repaired and needs the deployment key")
	}
	if opts.By == "" {
		opts.By = "oml lake repair"
	}
	res := &Result{DryRun: opts.DryRun, Archive: ArchiveRoot, Repaired: []TableResult{}, Journal: []Journalled{}}
	if !opts.DryRun && !opts.NoLease {
		holder := opts.Holder
		if holder == "" {
			host, _ := os.Hostname()
			holder = fmt.Sprintf("oml-lake-repair:%s:%d", host, os.Getpid())
		}
		release, lctx, err := lakewriter.HoldLease(ctx, opts.Pool, holder, opts.LeaseTTL, opts.LeaseWait)
		if err != nil {
			var nl *lakewriter.NotLeaderError
			if errors.As(err, &nl) {
				return nil, fmt.Errorf("%w; a repair waits for it (--wait) and never runs beside a drain: stop oml lake drain or retry when its batch is done", err)
			}
			return nil, err
		}
		defer release()
		ctx = lctx
	}
	plan, err := MakePlan(ctx, opts)
	if err != nil {
		return nil, err
	}
	res.Plan = *plan
	if opts.DryRun {
		res.Remaining = len(plan.Tables) + len(plan.NotRepaired)
		return res, nil
	}
	// A pass can uncover more (a lost data file dropped from the log shows
	// its rows missing; a rewound table may lack rows the next pass puts
	// back), so the plan is recomputed after each pass: that is also the
	// confirmation that the repair worked.
	for pass := 0; pass < maxPasses && len(plan.Tables) > 0; pass++ {
		if pass > 0 {
			res.Plan.Tables = append(res.Plan.Tables, plan.Tables...)
		}
		if err := runPass(ctx, opts, plan, res); err != nil {
			return res, err
		}
		if plan, err = MakePlan(ctx, opts); err != nil {
			return res, err
		}
	}
	if err := opts.crash(BeforeJournal, ""); err != nil {
		return res, err
	}
	j, err := journalPending(ctx, opts, res.Plan.Digest)
	if err != nil {
		return res, err
	}
	res.Journal = j
	res.Remaining = len(plan.Tables) + len(plan.NotRepaired)
	res.Plan.Pending = plan.Pending
	return res, nil
}

// maxPasses bounds the plan-repair-replan loop of one run.
const maxPasses = 3

// runPass carries out one plan.
func runPass(ctx context.Context, opts Options, plan *Plan, res *Result) error {
	if !plan.Continuity.OK() {
		if err := lakewriter.RewindFrontier(ctx, opts.Pool, plan.Continuity.LastAgreedSeq); err != nil {
			return err
		}
	}
	for i := range plan.Tables {
		tp := &plan.Tables[i]
		var tr TableResult
		var err error
		switch {
		case tp.Action == ActionRemove:
			tr, err = applyRemove(ctx, opts, plan.Digest, tp)
		case tp.rows != nil:
			tr, err = applyRewrite(ctx, opts, plan.Digest, tp)
		default:
			tr, err = apply(ctx, opts, plan.Digest, tp)
		}
		if err != nil {
			return err
		}
		res.Repaired = append(res.Repaired, tr)
		if err := opts.crash(AfterTable, tp.Path); err != nil {
			return err
		}
	}
	return nil
}

// MakePlan computes the plan (read-only).
func MakePlan(ctx context.Context, opts Options) (*Plan, error) {
	c, err := lakewriter.CheckLake(ctx, opts.Pool, opts.Lake)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Continuity: c, Tables: []TablePlan{}, NotRepaired: []Skipped{}, Pending: []Skipped{}}
	switch {
	case !c.OK():
		// Row by row comparisons mean nothing while the lake holds another
		// history: rewind first; the rows are audited once it agrees.
		if opts.wants(Diverged) {
			if err := planRewinds(ctx, opts, plan); err != nil {
				return nil, err
			}
			break
		}
		plan.NotRepaired = append(plan.NotRepaired, Skipped{Class: string(Diverged), Count: int64(len(c.Tables)),
			Reason:  "the lake does not share the database's history (" + c.State + "): row classes are compared only once it does",
			Command: "oml lake repair --class diverged"})
	case wantsRows(opts):
		if err := planRows(ctx, opts, plan); err != nil {
			return nil, err
		}
	}
	// Whatever the continuity check says: the tables of tenants the
	// database does not know are in no history it has (lost.go).
	if err := planLost(ctx, opts, plan); err != nil {
		return nil, err
	}
	sort.Slice(plan.Tables, func(i, j int) bool { return plan.Tables[i].Path < plan.Tables[j].Path })
	plan.Digest = digest(plan)
	return plan, nil
}

// planRewinds adds a rewind (or rebuild) for every diverged table in
// scope whose tenant may be rewound.
func planRewinds(ctx context.Context, opts Options, plan *Plan) error {
	c := plan.Continuity
	switch c.State {
	case lakewriter.ContinuityDeployment:
		return fmt.Errorf("the lake belongs to another deployment (%s): check --lake; nothing to repair there", c.Detail)
	case lakewriter.ContinuityAhead:
		for _, t := range c.Tables {
			if key, ok := parseTablePath(t); ok && opts.inScope(key) {
				plan.NotRepaired = append(plan.NotRepaired, Skipped{Tenant: key.Tenant, Table: string(key.Kind), Class: string(Diverged), Count: 1,
					Reason:  "the lake is ahead of the database, which wrote nothing since: the lost tail can come back from the lake",
					Command: "oml chain restore-tail --tenant " + key.Tenant.String()})
			}
		}
		return nil
	}
	if c.LastAgreedSeq < 0 {
		return fmt.Errorf("the continuity check found no seq the lake and the database agree on (%s): nothing to rewind to; see docs/runbooks/continuity.md", c.Detail)
	}
	fc, err := chainverify.ForkCheck(ctx, opts.Pool, opts.Lake, opts.Tenant)
	if err != nil {
		return fmt.Errorf("fork check before rewinding: %w", err)
	}
	names, err := tenantNames(ctx, opts.Pool)
	if err != nil {
		return err
	}
	for _, t := range c.Tables {
		key, ok := parseTablePath(t)
		if !ok || !opts.inScope(key) {
			continue
		}
		if f, forked := fc.Forked(key.Tenant); forked {
			plan.NotRepaired = append(plan.NotRepaired, Skipped{Tenant: key.Tenant, Table: string(key.Kind), Class: string(Diverged), Count: 1,
				Reason: fmt.Sprintf("tenant %s's chain disagrees with what the lake saw (%s at seq %d) and that is not accepted: rewinding would throw the lost history away",
					key.Tenant, f.Reason, f.Seq),
				Command: "oml chain restore-tail --tenant " + key.Tenant.String() + " (tail only lost) or oml chain accept-fork --tenant " + key.Tenant.String() + " --reason R (written over)"})
			continue
		}
		tp, err := planRewind(ctx, opts.Lake, key, c.LastAgreedSeq)
		if err != nil {
			return err
		}
		tp.TenantName = names[key.Tenant]
		plan.Tables = append(plan.Tables, *tp)
	}
	return nil
}

// digest is the plan's identity: what it does to which table at which
// version (hex sha256 of its canonical JSON).
func digest(p *Plan) string {
	type entry struct {
		Path, Action               string
		Classes                    map[string]int64
		Read, Txn, Target, Restore int64
		Removes, Readds            []string
		LastAgreed                 int64
	}
	var es []entry
	for _, t := range p.Tables {
		e := entry{Path: t.Path, Action: t.Action, Classes: t.Classes, Read: t.ReadVersion, Txn: t.TxnVersion,
			Target: t.TargetTxnVersion, Restore: t.RestoreVersion, LastAgreed: p.Continuity.LastAgreedSeq}
		for _, a := range t.removes {
			e.Removes = append(e.Removes, a.Path)
		}
		for _, a := range t.readds {
			e.Readds = append(e.Readds, a.Path)
		}
		sort.Strings(e.Removes)
		sort.Strings(e.Readds)
		es = append(es, e)
	}
	b, _ := json.Marshal(es)
	sum := sha256.Sum256(append([]byte("oml-repair-plan-v1\x00"), b...))
	return hex.EncodeToString(sum[:])
}

// parseTablePath turns "<tenant_id>/bronze/events" back into its key.
func parseTablePath(p string) (tables.TableKey, bool) {
	id, dir, ok := strings.Cut(p, "/")
	if !ok {
		return tables.TableKey{}, false
	}
	tid, err := uuid.Parse(id)
	if err != nil {
		return tables.TableKey{}, false
	}
	for _, k := range tables.Kinds {
		if k.Dir() == dir {
			return tables.TableKey{Tenant: tid, Kind: k}, true
		}
	}
	return tables.TableKey{}, false
}

func tenantNames(ctx context.Context, pool *pgxpool.Pool) (map[uuid.UUID]string, error) {
	return tenant.Names(ctx, pool)
}

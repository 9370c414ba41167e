package maintain

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
)

// CheckpointResult says what CheckpointTable did.
type CheckpointResult struct {
	Version int64 `json:"version"` // the checkpointed version, -1: none written
	Actions int64 `json:"actions"`
}

// CheckpointTable writes a checkpoint of the table's latest version.
func CheckpointTable(ctx context.Context, t Table) (CheckpointResult, error) {
	return checkpointResult(delta.Checkpoint(ctx, t.Store))
}

// checkpointResult is what a delta checkpoint returned, as reported.
func checkpointResult(r delta.CheckpointResult, err error) (CheckpointResult, error) {
	if err != nil {
		return CheckpointResult{Version: -1}, err
	}
	return CheckpointResult{Version: r.Version, Actions: r.Actions}, nil
}

// VacuumTable runs delta.Vacuum on the table (its retention guard
// included) and, unless DryRun, log cleanup behind a retained checkpoint.
func VacuumTable(ctx context.Context, t Table, opts delta.VacuumOptions) (delta.VacuumResult, delta.CleanupResult, error) {
	cl := delta.CleanupResult{KeptCheckpoint: -1}
	vr, err := delta.Vacuum(ctx, t.Store, opts)
	if err != nil || opts.DryRun {
		return vr, cl, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	cl, err = delta.CleanupLog(ctx, t.Store, now)
	return vr, cl, err
}

// RunOptions configure Run.
type RunOptions struct {
	Policy Policy
	// DryRun measures and decides, does nothing.
	DryRun bool
	Now    func() time.Time // tests; nil: time.Now
	// Parallel is how many tables are maintained at once (0: what the
	// store suits, store.Concurrency: a few on a local disk, many on S3).
	// Tables are independent; one table's steps stay in order.
	Parallel int
}

// Report is what Run measured, decided and did for one table.
type Report struct {
	Measurements
	Plan        []Step            `json:"plan"`
	Erased      *EraseResult      `json:"erase_bodies,omitempty"`
	Compacted   *CompactResult    `json:"optimize,omitempty"`
	Checkpoint  *CheckpointResult `json:"checkpoint,omitempty"`
	Vacuumed    *VacuumReport     `json:"vacuum,omitempty"`
	LogCleaned  *int              `json:"log_files_deleted,omitempty"`
	Error       string            `json:"error,omitempty"`
	DryRun      bool              `json:"dry_run"`
	ElapsedSecs float64           `json:"elapsed_seconds"`
}

// VacuumReport is the JSON form of a vacuum.
type VacuumReport struct {
	Deleted int   `json:"files_deleted"`
	Bytes   int64 `json:"bytes_deleted"`
}

// Run measures each table, decides what is due and does only that,
// opts.Parallel tables at a time. A failure on one table is recorded in its
// report and the others go on; the returned error is the first failure in
// table order, if any. The reports are in table order; when ctx ends, the
// tables not maintained by then are left out and the error is ctx's.
//
// Tables are independent, and on S3 a table's work is mostly waiting on
// requests; the cost per table (about 0.5 ms of CPU to measure one with
// nothing due, 11 ms to optimize and checkpoint a small one) is in
// docs/maintenance.md, "Many tables".
func Run(ctx context.Context, tables []Table, opts RunOptions) ([]Report, error) {
	nowf := opts.Now
	if nowf == nil {
		nowf = time.Now
	}
	p := opts.Policy.withDefaults()
	par := opts.Parallel
	if par <= 0 && len(tables) > 0 {
		par = store.Concurrency(tables[0].Store)
	}
	reps := make([]Report, len(tables))
	errs := make([]error, len(tables))
	done := make([]bool, len(tables))
	var g errgroup.Group
	g.SetLimit(max(par, 1))
	for i, t := range tables {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			start := time.Now()
			rep, err := runTable(ctx, t, p, opts.DryRun, nowf)
			rep.ElapsedSecs = time.Since(start).Seconds()
			if err != nil {
				rep.Error = err.Error()
			}
			reps[i], errs[i], done[i] = rep, err, true
			return nil
		})
	}
	_ = g.Wait() // failures are per table, in errs
	var first error
	out := make([]Report, 0, len(tables))
	for i := range tables {
		if !done[i] {
			continue
		}
		out = append(out, reps[i])
		if errs[i] != nil && first == nil {
			first = errs[i]
		}
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	return out, first
}

// beforeSteps and beforeCheckpoint, set only by tests, run between
// measuring a table and its first step, and right before its checkpoint
// (to land a competing commit there deterministically).
var beforeSteps, beforeCheckpoint func(Table)

// runTable measures a table and does what is due. The table's snapshot is
// loaded once, by the measurement, and the steps that commit (erase-bodies,
// optimize, checkpoint) go on from it through one writer: its own commits
// keep it current, a commit another writer landed in between makes the
// next put-if-absent lose, which catches the writer up and lets the rewrite
// re-validate (as after any lost race), and the checkpoint catches up
// before it is written (checkpointOn). Loading the table again for every
// step cost as much as the step on a small table (docs/maintenance.md).
func runTable(ctx context.Context, t Table, p Policy, dryRun bool, nowf func() time.Time) (Report, error) {
	m, snap, err := measure(ctx, t, MeasureOptions{TargetSize: p.TargetSize, Now: nowf()})
	rep := Report{Measurements: m, DryRun: dryRun}
	if err != nil {
		return rep, err
	}
	rep.Plan = Decide(m, p)
	if rep.Plan == nil {
		rep.Plan = []Step{}
	}
	if dryRun || len(rep.Plan) == 0 {
		return rep, nil
	}
	if beforeSteps != nil {
		beforeSteps(t)
	}
	var w *delta.Writer
	if commits(rep.Plan) {
		if w, err = delta.WriterOn(t.Store, snap, delta.Options{Now: nowf}); err != nil {
			return rep, err
		}
	}
	for _, s := range rep.Plan {
		if w, err = runStep(ctx, t, s.Task, w, p, nowf, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// commits reports whether a plan has a step that commits to the table.
func commits(plan []Step) bool {
	for _, s := range plan {
		switch s.Task {
		case TaskEraseBodies, TaskOptimize, TaskCheckpoint:
			return true
		}
	}
	return false
}

// runStep does one step, recording it in rep. w is the table's writer for
// the steps that commit (nil once a step lost it: the next one opens its
// own); runStep returns the writer the next step goes on with.
func runStep(ctx context.Context, t Table, task Task, w *delta.Writer, p Policy, nowf func() time.Time, rep *Report) (*delta.Writer, error) {
	switch task {
	case TaskEraseBodies:
		r, next, err := eraseBodies(ctx, t, w, EraseOptions{Now: nowf})
		rep.Erased = &r
		return next, err
	case TaskOptimize:
		r, next, err := compact(ctx, t, w, CompactOptions{TargetSize: p.TargetSize, Now: nowf})
		rep.Compacted = &r
		return next, err
	case TaskCheckpoint:
		if beforeCheckpoint != nil {
			beforeCheckpoint(t)
		}
		r, err := checkpointOn(ctx, t, w)
		rep.Checkpoint = &r
		return w, err
	case TaskVacuum:
		// Always the table's own retention: maintain never forces.
		vr, cl, err := VacuumTable(ctx, t, delta.VacuumOptions{Now: nowf()})
		rep.Vacuumed = &VacuumReport{Deleted: len(vr.Deleted), Bytes: vr.Bytes}
		n := len(cl.Deleted)
		rep.LogCleaned = &n
		return w, err
	case TaskCleanupLog:
		if rep.LogCleaned != nil {
			return w, nil // vacuum already cleaned the log
		}
		cl, err := delta.CleanupLog(ctx, t.Store, nowf())
		n := len(cl.Deleted)
		rep.LogCleaned = &n
		return w, err
	}
	return w, nil
}

// checkpointOn checkpoints the table's latest version with w (nil: as
// CheckpointTable, from a fresh load). w's snapshot is the measured one or
// the one its own rewrite left, and the lake writer may have committed
// since: it catches up first (one listing of the log after its version),
// so the checkpoint is of the latest version, as a fresh load's would be.
func checkpointOn(ctx context.Context, t Table, w *delta.Writer) (CheckpointResult, error) {
	if w == nil {
		return CheckpointTable(ctx, t)
	}
	if _, err := w.Refresh(ctx); err != nil {
		return CheckpointResult{Version: -1}, err
	}
	return checkpointResult(w.Checkpoint(ctx))
}

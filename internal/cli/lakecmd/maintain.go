package lakecmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/tenant"
)

// tableSelection is the --tenant/--table pair the maintenance commands share.
type tableSelection struct {
	Tenant string
	Table  string
}

func (s *tableSelection) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.Tenant, "tenant", "", "only this tenant (name or id; an id needs no database)")
	cmd.Flags().StringVar(&s.Table, "table", "", "only this table: bronze, silver, gold (gold.lineage) or workareas (gold.workareas)")
}

// validate checks the flags before anything is opened.
func (s *tableSelection) validate() error {
	if s.Table != "" {
		if _, err := maintain.ParseKind(s.Table); err != nil {
			return cliutil.FlagErrorf("--table: %v", err)
		}
	}
	return nil
}

// maintainDeps are what the maintenance verbs' run functions share, as
// functions (newMaintainDeps fills them from the Factory; a test replaces
// them): the streams, the -o value and the selected tables.
type maintainDeps struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Tables resolves --tenant/--table to the tables under the lake root
	// (selectTables); its errors are the command's.
	Tables func(ctx context.Context, s tableSelection) ([]maintain.Table, error)
}

// writeTables prints the per-table rows of checkpoint, optimize and vacuum:
// {"tables": out} as JSON, or a table under header with cells(r) as the
// line of each row (nil leaves the row out, e.g. a table that does not
// exist and did not fail).
func writeTables[R any](io *iostreams.IOStreams, format cliutil.Format, out []R, header []string, cells func(R) []string) error {
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(io.Out, struct {
			Tables []R `json:"tables"`
		}{out})
	}
	var rows [][]string
	for _, r := range out {
		if c := cells(r); c != nil {
			rows = append(rows, c)
		}
	}
	return cliutil.Table(io, header, rows)
}

func newMaintainDeps(f *cliutil.Factory) maintainDeps {
	return maintainDeps{IO: f.IO, Format: f.Format, Tables: func(ctx context.Context, s tableSelection) ([]maintain.Table, error) {
		_, ts, err := selectTables(ctx, f, s)
		return ts, err
	}}
}

// selectTables resolves the selection to tables under the lake root. A
// tenant given by id needs no database; otherwise the tenants come from
// oml.tenants.
func selectTables(ctx context.Context, f *cliutil.Factory, s tableSelection) (store.Store, []maintain.Table, error) {
	var kinds []tables.Kind
	if s.Table != "" {
		k, err := maintain.ParseKind(s.Table)
		if err != nil {
			return nil, nil, cliutil.FlagErrorf("--table: %v", err)
		}
		kinds = []tables.Kind{k}
	}
	lake, err := f.Lake(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	var ids []uuid.UUID
	if id, err := uuid.Parse(s.Tenant); err == nil && f.DatabaseURL() == "" {
		ids = []uuid.UUID{id}
	} else {
		pool, err := f.CurrentDB(ctx)
		if err != nil {
			return nil, nil, err
		}
		if s.Tenant != "" {
			tn, err := f.Tenant(ctx, s.Tenant)
			if err != nil {
				return nil, nil, err
			}
			ids = []uuid.UUID{tn.ID}
		} else if ids, err = tenant.IDs(ctx, pool); err != nil {
			return nil, nil, cliutil.AsConfigError(err)
		}
	}
	tables, err := maintain.Tables(lake, ids, kinds)
	if err != nil {
		return nil, nil, err
	}
	return lake, tables, nil
}

// MaintainOptions are the inputs of `oml lake maintain`: its flags and what
// its run function needs, as functions (NewCmdMaintain fills them from the
// Factory; a test replaces them).
type MaintainOptions struct {
	maintainDeps
	// Maintain is maintain.Run: it measures each table and does what is due.
	Maintain func(ctx context.Context, tables []maintain.Table, o maintain.RunOptions) ([]maintain.Report, error)
	// Names maps tenant ids to names (nil without a database).
	Names func(ctx context.Context) (map[uuid.UUID]string, error)
	// Prune is --prune-outbox (pruneOutbox); its error is already
	// classified for the exit code.
	Prune func(ctx context.Context, o *MaintainOptions) (*outbox.PruneResult, error)

	tableSelection
	DryRun             bool
	MinSmallFiles      int
	TargetSize         string
	CheckpointInterval int64
	VacuumFraction     float64
	VacuumMinFiles     int
	PruneOutbox        bool
	OlderThan          string
	targetSize         int64
	olderThan          time.Duration
}

// NewCmdMaintain builds `oml lake maintain`.
func NewCmdMaintain(f *cliutil.Factory, runF func(context.Context, *MaintainOptions) error) *cobra.Command {
	opts := &MaintainOptions{maintainDeps: newMaintainDeps(f), Maintain: maintain.Run,
		Names: func(ctx context.Context) (map[uuid.UUID]string, error) { return tenantNames(ctx, f) },
		Prune: func(ctx context.Context, o *MaintainOptions) (*outbox.PruneResult, error) {
			return pruneOutbox(ctx, f, o)
		}}
	cmd := &cobra.Command{
		Use:   "maintain",
		Short: "Measure every Delta table and do only the maintenance that is due",
		Long: `Measure every tenant table from its Delta log (commits since the last
checkpoint, small files, tombstoned bytes past the retention, files that may
still hold an erased claim's ciphertext, log entries past the log retention)
and do only what the measurements say is due, in this order:

  erase-bodies  a live silver file may hold an erased claim's body
  optimize      at least --min-small-files files are below --target-size
  checkpoint    --checkpoint-interval commits (else the table's
                delta.checkpointInterval, else 100) since the last checkpoint
  vacuum        tombstones past the table's retention hold an erased body,
                or number --vacuum-min-files, or weigh --vacuum-fraction of
                the live bytes (vacuum never goes below the table's retention)
  cleanup-log   commits older than delta.logRetentionDuration lie behind a
                retained checkpoint

Safe from cron beside oml lake drain: every rewrite re-validates after a
commit lands in between and never publishes over a file another commit
removed. --dry-run shows the plan and does nothing. Exit code 1 if a table
failed (the others are still done). With --prune-outbox it then deletes the
outbox rows every table has applied that are older than --older-than (what
oml outbox prune --yes does; needs the owner role; with --dry-run it only
counts them). See docs/maintenance.md and docs/outbox.md.`,
		Example: `  oml lake maintain --dry-run
  oml lake maintain --tenant acme -o json
  oml lake maintain --prune-outbox --older-than 14d
  # cron, nightly:  15 3 * * *  oml lake maintain -o json >>/var/log/oml/maintain.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			var err error
			if opts.targetSize, err = parseTargetSize(opts.TargetSize); err != nil {
				return err
			}
			if opts.VacuumFraction < 0 || opts.MinSmallFiles < 0 || opts.VacuumMinFiles < 0 || opts.CheckpointInterval < 0 {
				return cliutil.FlagErrorf("thresholds cannot be negative")
			}
			if opts.PruneOutbox && (opts.Tenant != "" || opts.Table != "") {
				return cliutil.FlagErrorf("--prune-outbox prunes every tenant's outbox rows; it cannot be narrowed by --tenant or --table")
			}
			if cmd.Flags().Changed("older-than") && !opts.PruneOutbox {
				return cliutil.FlagErrorf("--older-than is the retention of --prune-outbox; pass both")
			}
			if opts.olderThan, err = cliutil.ParseRetention(opts.OlderThan); err != nil {
				return cliutil.FlagErrorf("--older-than: %v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return maintainRun(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&opts.DryRun, "dry-run", false, "measure and show the plan; change nothing")
	fl.IntVar(&opts.MinSmallFiles, "min-small-files", 16, "optimize a table once it has this many small files")
	fl.StringVar(&opts.TargetSize, "target-size", "128MiB", "files below this size are small; compaction aims for it")
	fl.Int64Var(&opts.CheckpointInterval, "checkpoint-interval", 0, "commits since the last checkpoint that make one due (0: the table's, else 100)")
	fl.Float64Var(&opts.VacuumFraction, "vacuum-fraction", 0.25, "vacuum when expired tombstoned bytes reach this share of the live bytes")
	fl.IntVar(&opts.VacuumMinFiles, "vacuum-min-files", 100, "vacuum when this many tombstones have expired")
	fl.BoolVar(&opts.PruneOutbox, "prune-outbox", false, "then delete the outbox rows every table has applied, like oml outbox prune --yes (as the owner)")
	fl.StringVar(&opts.OlderThan, "older-than", "7d", "with --prune-outbox: only rows created longer ago than this")
	return cmd
}

func maintainRun(ctx context.Context, opts *MaintainOptions) error {
	format, _ := opts.Format()
	tables, err := opts.Tables(ctx, opts.tableSelection)
	if err != nil {
		return err
	}
	reps, runErr := opts.Maintain(ctx, tables, maintain.RunOptions{
		DryRun: opts.DryRun,
		Policy: maintain.Policy{
			CheckpointInterval: opts.CheckpointInterval, MinSmallFiles: opts.MinSmallFiles, TargetSize: opts.targetSize,
			VacuumFraction: opts.VacuumFraction, VacuumMinFiles: opts.VacuumMinFiles,
		},
	})
	reps = cliutil.NonNil(reps)
	failed := 0
	for _, r := range reps {
		if r.Error != "" {
			failed++
		}
	}
	names, err := opts.Names(ctx)
	if err != nil {
		return err
	}
	var pruned *outbox.PruneResult
	var pruneErr error
	if opts.PruneOutbox && ctx.Err() == nil {
		pruned, pruneErr = opts.Prune(ctx, opts)
	}
	if format == cliutil.FormatJSON {
		out := make([]maintainJSON, 0, len(reps))
		for _, r := range reps {
			j := maintainJSON{Report: r}
			if id, err := uuid.Parse(strings.SplitN(r.Table, "/", 2)[0]); err == nil {
				j.TenantID = id.String()
			}
			if n := tenantOfPath(names, r.Table); n != "-" {
				j.Tenant = n
			}
			out = append(out, j)
		}
		if err := cliutil.WriteJSON(opts.IO.Out, struct {
			DryRun      bool                `json:"dry_run"`
			Tables      []maintainJSON      `json:"tables"`
			OutboxPrune *outbox.PruneResult `json:"outbox_prune,omitempty"`
		}{opts.DryRun, out, pruned}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, r := range reps {
			if !r.Exists && r.Error == "" {
				continue
			}
			who := tenantOfPath(names, r.Table)
			if len(r.Plan) == 0 && r.Error == "" {
				rows = append(rows, []string{r.Table, who, "-", "", "nothing due"})
			}
			for _, s := range r.Plan {
				rows = append(rows, []string{r.Table, who, string(s.Task), outcome(r, s.Task), s.Reason})
			}
			if r.Error != "" {
				rows = append(rows, []string{r.Table, who, "error", "failed", r.Error})
			}
		}
		// WHY last: the long free text, the column a terminal table wraps.
		if err := cliutil.Table(opts.IO, []string{"TABLE", "TENANT", "TASK", "DONE", "WHY"}, rows); err != nil {
			return err
		}
		if pruned != nil {
			if err := outboxcmd.Write(opts.IO, format, *pruned); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pruneErr != nil {
		return pruneErr
	}
	if failed > 0 {
		return cliutil.Findingsf("maintenance failed on %d table(s), first: %v; the others were done, rerun later (a rewrite that kept losing races to the lake writer is retried on the next run)", failed, runErr)
	}
	return nil
}

// maintainJSON is one table's report with its tenant's id and name beside
// it (the name only when the database is at hand), as other commands
// name tenants.
type maintainJSON struct {
	maintain.Report
	TenantID string `json:"tenant_id,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
}

// outcome describes what a step did, for the table view.
func outcome(r maintain.Report, t maintain.Task) string {
	if r.DryRun {
		return "dry run"
	}
	switch t {
	case maintain.TaskEraseBodies:
		if r.Erased != nil && r.Erased.FilesRewritten == 0 {
			return fmt.Sprintf("checked %d file(s): no erased body left", r.Erased.FilesScanned)
		}
		if r.Erased != nil {
			return fmt.Sprintf("%d bodies nulled in %d files", r.Erased.BodiesNulled, r.Erased.FilesRewritten)
		}
	case maintain.TaskOptimize:
		if r.Compacted != nil {
			return fmt.Sprintf("%d files -> %d", r.Compacted.FilesRemoved, r.Compacted.FilesAdded)
		}
	case maintain.TaskCheckpoint:
		if r.Checkpoint != nil && r.Checkpoint.Version >= 0 {
			return fmt.Sprintf("at v%d", r.Checkpoint.Version)
		}
	case maintain.TaskVacuum:
		if r.Vacuumed != nil {
			return fmt.Sprintf("%d files, %s deleted", r.Vacuumed.Deleted, maintain.HumanBytes(r.Vacuumed.Bytes))
		}
	case maintain.TaskCleanupLog:
		if r.LogCleaned != nil {
			return fmt.Sprintf("%d log files deleted", *r.LogCleaned)
		}
	}
	if r.Error != "" {
		return "not done"
	}
	return ""
}

// parseRetention accepts 7d, 36h, 90m or any Go duration (cliutil.ParseRetention).
func parseRetention(s string) (time.Duration, error) { return cliutil.ParseRetention(s) }

// parseTargetSize is --target-size (maintain, optimize): a positive size.
func parseTargetSize(s string) (int64, error) {
	n, err := cliutil.ParseBytes(s)
	if err != nil || n <= 0 {
		return 0, cliutil.FlagErrorf("--target-size %q is not a positive size (e.g. 128MiB)", s)
	}
	return n, nil
}

package lakecmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/maintain"
)

// repairLeaseWait bounds how long a repair waits for a running drain to let
// go of the lake writer lease (a drain releases it between batches when
// stopped; a crashed one's lease expires after its TTL, 30 s by default).
const repairLeaseWait = 45 * time.Second

// RepairOptions are the inputs of `oml lake repair`: its flags and what its
// run function needs, as functions (NewCmdRepair fills them from the
// Factory; a test replaces them).
type RepairOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open opens the database and the lake, resolves the flags and, unless
	// --dry-run, loads the deployment key: the engine's options, as a dry
	// run (repairOptions).
	Open func(ctx context.Context, opts *RepairOptions) (lakerepair.Options, error)
	// Repair is lakerepair.Run: it plans (DryRun) or repairs.
	Repair func(ctx context.Context, o lakerepair.Options) (*lakerepair.Result, error)

	tableSelection
	Classes []string
	DryRun  bool
	Yes     bool
}

// NewCmdRepair builds `oml lake repair`.
func NewCmdRepair(f *cliutil.Factory, runF func(context.Context, *RepairOptions) error) *cobra.Command {
	opts := &RepairOptions{IO: f.IO, Format: f.Format, Repair: lakerepair.Run,
		Open: func(ctx context.Context, o *RepairOptions) (lakerepair.Options, error) {
			return repairOptions(ctx, f, o)
		}}
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Make every Delta table equal what the journal says (rewind, re-materialize, remove, de-duplicate, rewrite), archive what is removed, journal the repair",
		Long: `The journal wins: compute a plan from the lake writer's continuity check
and the oml reconcile audit, and make each affected table equal to what the
database's history says it must hold, as ordinary Delta commits (operation
OML REPAIR, dataChange true, the txn version kept except for a rewind).

Row by row (reconcile's classes missing-in-lake, unexpected-in-lake,
duplicate-in-lake, digest-mismatch, state-mismatch, corrupt-file): every copy
of an affected event or claim is removed copy-on-write and the row the
journal and the fold say it must have is put back; a data file the store
lost is dropped from the log and its rows put back; a table that is gone is
rebuilt. A containment breach (a never-promoted claim in silver) is named
loudly: the replaced files keep its ciphertext until oml lake vacuum.
dead-lettered and stale-frontier are not repaired here; the plan names the
command that handles them. Rows oml outbox prune deleted are re-derived from
the journal; a table below its outbox prune mark (restored from an old copy),
which the lake writer holds, is caught up to the frontier (below-prune-mark).
The tables of a tenant the database does not know (created only in a
timeline a failover lost) are archived and emptied (lost-timeline-tenant),
journalled on the provider chain.

A table whose history diverged from the database's (a failover or a
point-in-time restore lost a tail the lake had drained, and the database
wrote on top of it) is rewound to the last seq both histories share: a
restore-style commit that removes the files added since and re-adds the ones
removed since, with the txn version set back, so the next oml lake drain
re-applies the new timeline exactly once. When the files or log entries that
needs are gone (vacuum, log cleanup), the table is emptied instead and the
drain rebuilds it from the database. A tenant whose chain fork was not
accepted is not rewound: run oml chain accept-fork (or restore-tail) first.

Nothing is destroyed: every row a repair removes is first written as Parquet
with a manifest.json under <lake>/_oml_repair/<tenant>/<layer>/<name>/v<version>/.
Every repair is journalled: one lake.repaired event per tenant, on its chain,
naming each commit, the plan digest and the counts (needs the deployment
key: --signing-key or OML_SIGNING_KEY_FILE). The repair holds the lake writer
lease (it waits up to 45 s for a drain to let go of it), and is safe to
re-run after a crash at any point; a second run finds nothing to do.

On a terminal the plan is shown and confirmed before anything changes;
--yes skips the question (scripts must pass it); --dry-run only shows the
plan. Exit status: 0 nothing to do, or everything repaired; 1 something is
left unrepaired (or, with --dry-run, the plan is not empty); 2 usage,
configuration or connection error. See docs/lake-repair.md.`,
		Example: `  oml lake repair --dry-run
  oml lake repair --tenant acme --yes -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			for _, c := range opts.Classes {
				if !knownRepairClass(c) {
					return cliutil.FlagErrorf("--class %q: use one of %s", c, strings.Join(repairClasses(), ", "))
				}
			}
			if opts.DryRun && opts.Yes {
				return cliutil.FlagErrorf("--dry-run and --yes contradict each other: pass one")
			}
			if !opts.DryRun && !opts.Yes && !f.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("repair changes the lake and stdin is not a terminal to confirm on: pass --yes (or --dry-run to see the plan)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return repairRun(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().StringSliceVar(&opts.Classes, "class", nil, "only repair this finding class (repeatable): "+strings.Join(repairClasses(), ", "))
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "show the plan, change nothing")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "repair without asking")
	return cmd
}

func repairClasses() []string {
	out := []string{string(lakerepair.Diverged), string(lakerepair.LostTenant)}
	for _, c := range lakerepair.RowClasses {
		out = append(out, string(c))
	}
	return out
}

func knownRepairClass(c string) bool {
	for _, k := range repairClasses() {
		if k == c {
			return true
		}
	}
	return false
}

// repairOptions is RepairOptions.Open over the Factory.
func repairOptions(ctx context.Context, f *cliutil.Factory, opts *RepairOptions) (lakerepair.Options, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return lakerepair.Options{}, err
	}
	lake, err := f.Lake(ctx, "")
	if err != nil {
		return lakerepair.Options{}, err
	}
	ro := lakerepair.Options{Pool: pool, Lake: lake, DryRun: true, By: cliutil.OSUser(), LeaseWait: repairLeaseWait}
	if ro.By == "" {
		ro.By = "oml lake repair"
	}
	if opts.Tenant != "" {
		t, err := f.Tenant(ctx, opts.Tenant)
		if err != nil {
			return lakerepair.Options{}, err
		}
		ro.Tenant = &t.ID
	}
	if opts.Table != "" {
		if ro.Kind, err = maintain.ParseKind(opts.Table); err != nil {
			return lakerepair.Options{}, cliutil.FlagErrorf("--table: %v", err)
		}
	}
	for _, c := range opts.Classes {
		ro.Classes = append(ro.Classes, lakerepair.Class(c))
	}
	if !opts.DryRun {
		k, err := f.SigningKey("repair journals lake.repaired and needs the deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE (or --dry-run to see the plan)")
		if err != nil {
			return lakerepair.Options{}, err
		}
		ro.Signer = k
	}
	return ro, nil
}

func repairRun(ctx context.Context, opts *RepairOptions) error {
	format, _ := opts.Format()
	ro, err := opts.Open(ctx, opts)
	if err != nil {
		return err
	}
	if !opts.DryRun && !opts.Yes {
		// A terminal without --yes: show the plan, change nothing unless
		// the operator says yes.
		plan, err := opts.Repair(ctx, ro)
		if err != nil {
			return repairError(err)
		}
		if len(plan.Plan.Tables) > 0 {
			if err := printRepair(opts.IO, plan); err != nil {
				return err
			}
			if !cliutil.Confirm(opts.IO, fmt.Sprintf("Repair %d table(s) as planned (plan %.12s)? [y/N] ", len(plan.Plan.Tables), plan.Plan.Digest)) {
				return cliutil.Findingsf("nothing was changed")
			}
		}
	}
	ro.DryRun = opts.DryRun
	res, err := opts.Repair(ctx, ro)
	if err != nil {
		return repairError(err)
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, res); err != nil {
			return err
		}
	} else if err := printRepair(opts.IO, res); err != nil {
		return err
	}
	switch {
	case res.Remaining > 0 && res.DryRun:
		return cliutil.Findingsf("the plan is not empty: %d table(s) to repair, %d left to other commands", len(res.Plan.Tables), len(res.Plan.NotRepaired))
	case res.Remaining > 0:
		return cliutil.Findingsf("%d repair(s) remain; see the plan above", res.Remaining)
	}
	return nil
}

func repairError(err error) error {
	var nl *lakewriter.NotLeaderError
	if errors.As(err, &nl) {
		return cliutil.Findingsf("%v", err)
	}
	return err
}

func printRepair(ios *iostreams.IOStreams, res *lakerepair.Result) error {
	out := ios.Out
	if res.Nothing() {
		_, err := fmt.Fprintln(out, "Nothing to repair: the lake agrees with the database.")
		return err
	}
	if len(res.Plan.Tables) > 0 {
		rows := make([][]string, 0, len(res.Plan.Tables))
		for _, t := range res.Plan.Tables {
			name := t.TenantName
			if name == "" {
				name = t.Tenant.String()
			}
			rows = append(rows, []string{name, t.Table, t.Action, classes(t.Classes),
				fmt.Sprintf("v%d txn %d", t.ReadVersion, t.TxnVersion), fmt.Sprintf("txn %d", t.TargetTxnVersion),
				fmt.Sprintf("-%d +%d", t.RemoveFiles, t.ReaddFiles), t.Detail})
		}
		verb := "Plan"
		if !res.DryRun {
			verb = "Repaired"
		}
		if _, err := fmt.Fprintf(out, "%s %.12s (shared seq %d):\n", verb, res.Plan.Digest, res.Plan.Continuity.LastAgreedSeq); err != nil {
			return err
		}
		if err := cliutil.Table(ios, []string{"TENANT", "TABLE", "ACTION", "CLASSES", "NOW", "AFTER", "FILES", "DETAIL"}, rows); err != nil {
			return err
		}
	}
	for _, t := range res.Plan.Tables {
		if t.Breach > 0 {
			_, _ = fmt.Fprintf(ios.ErrOut, "CONTAINMENT BREACH: %s holds %d claim(s) that were never promoted; the repair removes the rows, but the replaced data files keep their ciphertext until `oml lake vacuum --tenant %s --table silver` removes them after the retention (docs/erasure.md).\n",
				t.Path, t.Breach, t.Tenant)
		}
	}
	if len(res.Plan.NotRepaired) > 0 {
		if _, err := fmt.Fprintln(out, "Not repaired here:"); err != nil {
			return err
		}
		rows := make([][]string, 0, len(res.Plan.NotRepaired))
		for _, s := range res.Plan.NotRepaired {
			rows = append(rows, []string{s.Tenant.String(), s.Table, s.Class, fmt.Sprint(s.Count), s.Command, s.Reason})
		}
		if err := cliutil.Table(ios, []string{"TENANT", "TABLE", "CLASS", "COUNT", "RUN", "WHY"}, rows); err != nil {
			return err
		}
	}
	for _, p := range res.Plan.Pending {
		if _, err := fmt.Fprintf(out, "pending: %d %s row(s) of %s/%s: %s (%s)\n", p.Count, p.Class, p.Tenant, p.Table, p.Reason, p.Command); err != nil {
			return err
		}
	}
	if !res.DryRun {
		for _, r := range res.Repaired {
			if _, err := fmt.Fprintf(out, "%s: %s committed as version %d (txn version %d), %d row(s) archived in %s\n",
				r.Path, r.Action, r.DeltaVersion, r.TxnVersion, r.RowsArchived, r.Archive); err != nil {
				return err
			}
		}
		for _, j := range res.Journal {
			if _, err := fmt.Fprintf(out, "journalled lake.repaired on tenant %s's chain at seq %d (%d table commit(s))\n", j.Tenant, j.Seq, j.Tables); err != nil {
				return err
			}
		}
		if len(res.Repaired) > 0 {
			if _, err := fmt.Fprintln(out, "Next: oml lake drain --once re-applies the database's rows; then oml reconcile confirms."); err != nil {
				return err
			}
		}
	}
	return nil
}

func classes(m map[string]int64) string {
	var parts []string
	for _, c := range repairClasses() {
		if n, ok := m[c]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	for c, n := range m {
		if !knownRepairClass(c) {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}

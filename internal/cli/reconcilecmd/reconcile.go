// Package reconcilecmd is `oml reconcile`: audit the lake against the
// journal fold (internal/reconcile; docs/reconcile.md lists the finding
// classes and what to do about each).
package reconcilecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/reconcile"
)

// Options are `oml reconcile`'s flags and what its run function needs, as
// functions (NewCmd fills them from the Factory; a test replaces them).
type Options struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open opens the lake and the database, refuses a lake that holds
	// nothing although rows were drained (a finding), and resolves --tenant
	// (nil: every tenant); its errors are the command's.
	Open func(ctx context.Context, tenant string) (*pgxpool.Pool, store.Store, *uuid.UUID, error)
	// Reconcile is reconcile.Run.
	Reconcile func(ctx context.Context, pool *pgxpool.Pool, lake store.Store, o reconcile.Options) (*reconcile.Report, error)

	Tenant      string
	StaleAfter  time.Duration
	SkipBodies  bool
	MaxFindings int
}

// NewCmd builds `oml reconcile`.
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Format: f.Format, Reconcile: reconcile.Run,
		Open: func(ctx context.Context, tenant string) (*pgxpool.Pool, store.Store, *uuid.UUID, error) {
			return open(ctx, f, tenant)
		}}
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Audit the lake against the journal fold; named finding classes",
		Long: `Compare every tenant's Delta tables (bronze.events, silver.claims, gold.lineage, gold.workareas)
with what the journal and the claim fold in PostgreSQL say they must hold, at
or below the lake's frontier (rows above it are not drained yet). Findings:

  missing-in-lake      a journal event, promoted claim or change to one at or below the frontier has no lake row
  unexpected-in-lake   a lake row the journal does not explain (incl. a held body: a containment breach)
  digest-mismatch      lake digests or ciphertext bytes disagree with the journalled digests
  state-mismatch       the lake row's state or attribution disagrees with the fold
  duplicate-in-lake    a row is in the lake more than once
  dead-lettered        an outbox row the lake writer skipped and nobody re-enqueued yet
  stale-frontier       the frontier lags more than --stale-after (with the blocking transaction)
  erased-key-present   an erased artifact whose data key still exists

Both sides are streamed in key order and merged; memory stays flat in the
number of claims, except gold's journal side, a replay of the tenant's chain
(see docs/reconcile.md). A progress bar is drawn on stderr
when it is a terminal.
Exit status: 0 no findings; 1 findings; 2 usage, configuration or connection error.`,
		Example: `  oml reconcile
  oml reconcile --tenant acme -o json
  oml reconcile --stale-after 15m --skip-bodies`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.MaxFindings < 0 {
				return cliutil.FlagErrorf("--max-findings must be 0 (the default, 1000) or more")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "audit only this tenant (name or id)")
	cmd.Flags().DurationVar(&opts.StaleAfter, "stale-after", 5*time.Minute, "report stale-frontier when the oldest row not in the lake is older than this (0 or negative: never)")
	cmd.Flags().BoolVar(&opts.SkipBodies, "skip-bodies", false, "do not read and hash silver bodies (digest columns are still compared)")
	cmd.Flags().IntVar(&opts.MaxFindings, "max-findings", 0, "findings listed per class (default 1000; counts are always complete)")
	return cmd
}

// open is Options.Open over the Factory.
func open(ctx context.Context, f *cliutil.Factory, tenant string) (*pgxpool.Pool, store.Store, *uuid.UUID, error) {
	lake, err := f.Lake(ctx, "oml reconcile reads the lake, but no lake is configured: pass --lake or set OML_LAKE_URL")
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	// A lake that holds nothing although rows were drained is one problem
	// (the wrong --lake, or a lost lake), not one missing-in-lake finding
	// per claim: say that in one sentence and stop.
	if err := lakewriter.CheckDrainedLake(ctx, pool, lake); err != nil {
		var lm *lakewriter.LakeMissingError
		if errors.As(err, &lm) {
			return nil, nil, nil, cliutil.Findingsf("%s", lm.Error())
		}
		return nil, nil, nil, cliutil.AsConfigError(err)
	}
	var only *uuid.UUID
	if tenant != "" {
		t, err := f.Tenant(ctx, tenant)
		if err != nil {
			return nil, nil, nil, err
		}
		only = &t.ID
	}
	return pool, lake, only, nil
}

func run(ctx context.Context, opts *Options) error {
	format, _ := opts.Format()
	pool, lake, only, err := opts.Open(ctx, opts.Tenant)
	if err != nil {
		return err
	}
	stale := opts.StaleAfter
	if stale == 0 {
		stale = -1 // the flag's 0 means "never", the library's 0 means "default"
	}
	prog := &reconcile.Progress{}
	stop := func() {}
	if opts.IO.IsStderrTTY() {
		stop = startProgress(opts.IO.ErrOut, prog)
	}
	rep, err := opts.Reconcile(ctx, pool, lake, reconcile.Options{Tenant: only, StaleAfter: stale, SkipBodies: opts.SkipBodies,
		MaxFindings: opts.MaxFindings, Progress: prog})
	stop()
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, rep); err != nil {
			return err
		}
	} else if err := printTable(opts.IO, rep); err != nil {
		return err
	}
	if !rep.OK {
		var parts []string
		for _, c := range reconcile.Classes {
			if n := rep.Counts[c]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, c))
			}
		}
		return cliutil.Findingsf("reconcile found %d problem(s): %s (see docs/reconcile.md)", rep.Total(), strings.Join(parts, ", "))
	}
	return nil
}

func printTable(ios *iostreams.IOStreams, rep *reconcile.Report) error {
	out := ios.Out
	tables := 0
	for _, t := range rep.Tenants {
		tables += len(t.Tables)
	}
	summary := fmt.Sprintf("Compared %s, %s at frontier %d: %s and %s against %s in %.1fs.",
		cliutil.Count(len(rep.Tenants), "tenant"), cliutil.Count(tables, "table"), rep.Frontier,
		cliutil.Count(rep.Stats.Events, "journal event"), cliutil.Count(rep.Stats.Claims, "claim"), cliutil.Count(rep.Stats.LakeRows, "lake row"), rep.Stats.ElapsedSeconds)
	if rep.OK {
		if _, err := fmt.Fprintln(out, summary+"\nNo findings: the lake agrees with the journal fold."); err != nil {
			return err
		}
	} else {
		if _, err := fmt.Fprintln(out, summary); err != nil {
			return err
		}
		fs := append([]reconcile.Finding(nil), rep.Findings...)
		order := map[reconcile.Class]int{}
		for i, c := range reconcile.Classes {
			order[c] = i
		}
		sort.SliceStable(fs, func(i, j int) bool { return order[fs[i].Class] < order[fs[j].Class] })
		if err := findingsTable(ios, fs); err != nil {
			return err
		}
		if rep.Truncated {
			if _, err := fmt.Fprintln(out, "(more findings were counted than listed; raise --max-findings or use -o json for the counts)"); err != nil {
				return err
			}
		}
	}
	if len(rep.Accepted) > 0 {
		if _, err := fmt.Fprintf(out, "\n%d accepted gap(s): abandoned dead letters the journal says will never reach the lake (listed, not failures):\n", len(rep.Accepted)); err != nil {
			return err
		}
		return findingsTable(ios, rep.Accepted)
	}
	return nil
}

func findingsTable(ios *iostreams.IOStreams, fs []reconcile.Finding) error {
	rows := make([][]string, 0, len(fs))
	for _, x := range fs {
		claim := "-"
		if x.ArtifactID != "" {
			claim = x.ArtifactID
			if x.Version > 0 {
				claim = fmt.Sprintf("%s v%d", x.ArtifactID, x.Version)
			}
		}
		if x.Workarea != "" {
			claim = "workarea " + x.Workarea
		}
		seq, oseq := "-", "-"
		if x.Seq > 0 {
			seq = fmt.Sprint(x.Seq)
		}
		if x.OutboxSeq > 0 {
			oseq = fmt.Sprint(x.OutboxSeq)
		}
		name := x.TenantName
		if name == "" {
			name = "-"
		}
		table := x.Table
		if table == "" {
			table = "-"
		}
		rows = append(rows, []string{string(x.Class), name, table, claim, seq, oseq, x.Detail})
	}
	return cliutil.Table(ios, []string{"CLASS", "TENANT", "TABLE", "CLAIM", "SEQ", "OUTBOX SEQ", "DETAIL"}, rows)
}

// startProgress draws a one-line progress bar on w until stop is called.
func startProgress(w io.Writer, p *reconcile.Progress) (stop func()) {
	return cliutil.LiveLine(w, func(elapsed time.Duration) string { return progressLine(p, elapsed) })
}

func progressLine(p *reconcile.Progress, elapsed time.Duration) string {
	n, total := p.Done.Load(), p.Total.Load()
	head := fmt.Sprintf("reconciling tenant %d/%d, %d lake rows read", min(p.TenantsDone.Load()+1, max(p.Tenants.Load(), 1)), p.Tenants.Load(), p.LakeRows.Load())
	if total <= 0 || n > total {
		return fmt.Sprintf("%s, %d journal events and claims compared", head, n)
	}
	const width = 30
	filled := int(float64(width) * float64(n) / float64(total))
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	return fmt.Sprintf("%s [%s] %3d%% %d/%d journal events and claims compared, %s", head, bar, 100*n/total, n, total, elapsed.Round(time.Second))
}

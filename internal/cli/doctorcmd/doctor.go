// Package doctorcmd is `oml doctor`: every health check once (table or
// JSON), or live in a terminal UI with --watch.
package doctorcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/pgconn"
)

// Options are `oml doctor`'s flags and what its run function needs, as
// functions (NewCmd fills them from the Factory; a test replaces them).
type Options struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// DatabaseURL and LakeURL are the configured URLs (flag, else
	// environment), checked before any check runs.
	DatabaseURL, LakeURL func() string
	// Checks returns the function that runs every check once (runner over
	// the Factory, its pool opened with doctorPool).
	Checks func(o *Options) func(ctx context.Context) doctor.Report

	Watch      bool
	Interval   time.Duration
	Strict     bool
	Deep       bool
	Timeout    time.Duration
	Thresholds doctor.Thresholds
	// MetricsFile, when set, receives the report in the Prometheus text
	// format (node_exporter's textfile collector), written atomically.
	MetricsFile string

	smallFileSize, vacuumWarn string
}

// NewCmd builds `oml doctor`. runF, when set, replaces the run (tests of
// flag parsing).
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Format: f.Format, DatabaseURL: f.DatabaseURL, LakeURL: f.LakeURL, Thresholds: doctor.DefaultThresholds(),
		Checks: func(o *Options) func(ctx context.Context) doctor.Report {
			f.PoolOptions = doctorPool
			return o.runner(f)
		}}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Run every health check: database, lake, writer, lag, horizon, dead letters, chains, Delta tables",
		Long: `Run every health check and say what is wrong and what to do.

Checks (stable ids; each has a runbook at docs/runbooks/<id>.md):
  database      database reachable, schema current (pending migrations named)
  lake          lake reachable and honoring put-if-absent (a scratch-key probe)
  lease         a live lake writer, or how long rows have waited without one
  lag           rows, seq gap and seconds between the outbox and the lake
  horizon       an open transaction holding the snapshot horizon (pid, age, app)
  dead-letters  dead-lettered outbox rows (count, oldest)
  fork          every tenant's journal against its newest witnessed head
  chain         chain verification of everything appended since the last
                verified head (incremental; stores the new verified heads)
  delta         Delta tables: commits since checkpoint, small files, bytes
                past retention
  reconcile     the lake against the journal fold (only with --deep)

Each check is ok, warn, fail or skipped (with the reason). Exit status: 0 no
check failed (warnings too, unless --strict); 1 a check failed (or warned,
with --strict); 2 doctor could not run at all (no or malformed database URL,
bad flags, --watch without a terminal).

With --watch, a live terminal UI re-runs the checks every --interval: move
with the arrow keys or j/k, enter opens a check's details and runbook, r
re-runs now, +/- change the interval, q quits. See docs/doctor.md.`,
		Example: `  oml doctor
  oml doctor -o json
  oml doctor --strict --lag-warn 30s --lag-fail 5m
  oml doctor --watch --interval 5s
  oml doctor --metrics-file /var/lib/node_exporter/textfile/oml_doctor.prom`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.finish(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	th := &opts.Thresholds
	fl.BoolVarP(&opts.Watch, "watch", "w", false, "live terminal UI that re-runs the checks every --interval")
	fl.DurationVar(&opts.Interval, "interval", 10*time.Second, "with --watch, how often the checks re-run")
	fl.BoolVar(&opts.Strict, "strict", false, "exit 1 on warnings too")
	fl.BoolVar(&opts.Deep, "deep", false, "also run the slow checks (reconcile)")
	fl.DurationVar(&opts.Timeout, "timeout", 10*time.Second, "time limit for each check")
	fl.StringVar(&opts.MetricsFile, "metrics-file", "", "also write the report to `FILE` in the Prometheus text format (for node_exporter's textfile collector; see docs/monitoring/)")
	fl.DurationVar(&th.LagWarn, "lag-warn", th.LagWarn, "lag: warn when the oldest unapplied outbox row is this old")
	fl.DurationVar(&th.LagFail, "lag-fail", th.LagFail, "lag: fail when the oldest unapplied outbox row is this old")
	fl.Int64Var(&th.BacklogWarn, "backlog-warn", th.BacklogWarn, "lag: warn at this many outbox rows above the frontier")
	fl.Int64Var(&th.BacklogFail, "backlog-fail", th.BacklogFail, "lag: fail at this many outbox rows above the frontier")
	fl.Int64Var(&th.SeqGapWarn, "seq-gap-warn", th.SeqGapWarn, "lag: warn at this many outbox seqs above the frontier (while rows wait)")
	fl.Int64Var(&th.SeqGapFail, "seq-gap-fail", th.SeqGapFail, "lag: fail at this many outbox seqs above the frontier (while rows wait)")
	fl.DurationVar(&th.WriterDownWarn, "writer-down-warn", th.WriterDownWarn, "lease: warn when rows have waited this long with no live lake writer")
	fl.DurationVar(&th.WriterDownFail, "writer-down-fail", th.WriterDownFail, "lease: fail when rows have waited this long with no live lake writer")
	fl.DurationVar(&th.HorizonWarn, "horizon-warn", th.HorizonWarn, "horizon: warn when a transaction has held the horizon this long")
	fl.DurationVar(&th.HorizonFail, "horizon-fail", th.HorizonFail, "horizon: fail when a transaction has held the horizon this long")
	fl.Int64Var(&th.DeadLettersFail, "dead-letters-fail", th.DeadLettersFail, "dead-letters: fail at this many (any dead letter warns)")
	fl.Int64Var(&th.CheckpointWarn, "checkpoint-warn", th.CheckpointWarn, "delta: warn at this many commits since a table's last checkpoint")
	fl.Int64Var(&th.CheckpointFail, "checkpoint-fail", th.CheckpointFail, "delta: fail at this many commits since a table's last checkpoint")
	fl.StringVar(&opts.smallFileSize, "small-file-size", "8MiB", "delta: a live file smaller than this is small")
	fl.IntVar(&th.SmallFilesWarn, "small-files-warn", th.SmallFilesWarn, "delta: warn when a table has this many small files")
	fl.StringVar(&opts.vacuumWarn, "vacuum-warn", "1GiB", "delta: warn when a table's removed files past retention reach this size")
	fl.Int64Var(&th.ScrubEvents, "scrub-events", th.ScrubEvents, "chain: old events re-verified per run (whole chains, least recently verified first; 0: no scrub)")
	fl.DurationVar(&th.OutboxPrunableWarn, "outbox-prunable-warn", th.OutboxPrunableWarn, "outbox: warn when the oldest row every table has applied is older than this (prune is not running)")
	fl.DurationVar(&th.ScrubPeriod, "scrub-period", th.ScrubPeriod, "chain: every event should be re-verified within this; warn when the last full pass is older")
	return cmd
}

// finish parses and validates what cobra cannot.
func (o *Options) finish() error {
	var err error
	if o.Thresholds.SmallFileSize, err = cliutil.ParseBytes(o.smallFileSize); err != nil {
		return cliutil.FlagErrorf("--small-file-size: %v", err)
	}
	if o.Thresholds.VacuumWarn, err = cliutil.ParseBytes(o.vacuumWarn); err != nil {
		return cliutil.FlagErrorf("--vacuum-warn: %v", err)
	}
	if err := o.Thresholds.Validate(); err != nil {
		return cliutil.FlagErrorf("%v", err)
	}
	if o.Timeout <= 0 {
		return cliutil.FlagErrorf("--timeout must be positive")
	}
	if o.Interval < 500*time.Millisecond {
		return cliutil.FlagErrorf("--interval must be at least 500ms")
	}
	if o.Watch && o.MetricsFile != "" {
		return cliutil.FlagErrorf("--metrics-file is for one-shot runs on a schedule; drop --watch")
	}
	return nil
}

// doctorPool is the pool doctor asks the Factory for: its own
// application name, a few connections for checks run side by side, and a
// bounded connect so a database that does not answer is a failing check,
// not a hang. The Factory does not remember a failed open, so --watch
// retries a database that was down and reuses one that is up.
var doctorPool = pgconn.Options{ApplicationName: "oml-doctor", MaxConns: 8, ConnectTimeout: 5 * time.Second}

// runner returns the function that runs every check once.
func (o *Options) runner(f *cliutil.Factory) func(ctx context.Context) doctor.Report {
	dopts := doctor.Options{
		DB: f.DB, Deep: o.Deep, Thresholds: &o.Thresholds, Timeout: o.Timeout,
	}
	if f.LakeURL() != "" {
		dopts.Lake = f.OptionalLake
	}
	return func(ctx context.Context) doctor.Report { return doctor.Run(ctx, dopts) }
}

func run(ctx context.Context, o *Options) error {
	format, _ := o.Format()
	if o.Watch && format == cliutil.FormatJSON {
		return cliutil.FlagErrorf("--watch is a terminal UI and has no JSON form; drop -o json, or run oml doctor -o json on a schedule")
	}
	if o.Watch && !o.IO.IsStdoutTTY() {
		return cliutil.ConfigErrorf("oml doctor --watch needs a terminal on stdout; run oml doctor (or oml doctor -o json) for a one-shot report")
	}
	dsn := o.DatabaseURL()
	// Doctor cannot run at all without a usable database URL (exit 2); a
	// database that does not answer is the database check's fail (exit 1).
	if _, err := pgconn.ParseConfig(dsn, pgconn.Options{}); err != nil {
		return cliutil.AsConfigError(err)
	}
	// A malformed lake URL (--lake ./lake) is the operator's typo, not a
	// lake that is down: exit 2 before any check runs.
	if u := o.LakeURL(); u != "" {
		if err := store.ValidateURL(u); err != nil {
			return cliutil.AsConfigError(err)
		}
	}
	runChecks := o.Checks(o)
	if o.Watch {
		return watch(ctx, o, runChecks)
	}
	rep := runChecks(ctx)
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(o.IO.Out, rep); err != nil {
			return err
		}
	} else if err := WriteReport(o.IO.Out, rep, o.IO.IsStdoutTTY()); err != nil {
		return err
	}
	if o.MetricsFile != "" {
		if err := doctor.WriteMetricsFile(o.MetricsFile, &rep); err != nil {
			return cliutil.AsConfigError(err)
		}
	}
	return verdict(rep, o.Strict, format == cliutil.FormatJSON)
}

// verdict maps the report to the exit status: a FindingsError (exit 1) when
// a check failed, or warned under --strict.
func verdict(rep doctor.Report, strict, quiet bool) error {
	if !rep.Failed(strict) {
		return nil
	}
	if quiet {
		return cliutil.ErrFindings
	}
	var ids []string
	for _, c := range rep.Checks {
		if c.Status == doctor.StatusFail || (strict && c.Status == doctor.StatusWarn) {
			ids = append(ids, c.ID)
		}
	}
	what := "failed"
	if strict {
		what = "failed or warned (--strict)"
	}
	return cliutil.Findingsf("%d check(s) %s: %s; each names its runbook above", len(ids), what, strings.Join(ids, ", "))
}

// ANSI colours for the plain report on a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[1;31m"
	ansiDim    = "\x1b[2m"
)

func statusColour(s doctor.Status) string {
	switch s {
	case doctor.StatusOK:
		return ansiGreen
	case doctor.StatusWarn:
		return ansiYellow
	case doctor.StatusFail:
		return ansiRed
	}
	return ansiDim
}

// WriteReport prints the plain report: one aligned line per check, then the
// details and runbook of every check that warned or failed, then a tally.
// Colour only when colour is true (stdout is a terminal).
func WriteReport(w io.Writer, rep doctor.Report, colour bool) error {
	paint := func(s doctor.Status, text string) string {
		if !colour {
			return text
		}
		return statusColour(s) + text + ansiReset
	}
	idW := len("CHECK")
	for _, c := range rep.Checks {
		idW = max(idW, len(c.ID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-7s  %s\n", idW, "CHECK", "STATUS", "SUMMARY")
	for _, c := range rep.Checks {
		// Pad before painting so escape codes never break the alignment.
		fmt.Fprintf(&b, "%-*s  %s  %s\n", idW, c.ID, paint(c.Status, fmt.Sprintf("%-7s", c.Status)), c.Summary)
	}
	for _, c := range rep.Checks {
		if c.Status != doctor.StatusWarn && c.Status != doctor.StatusFail {
			continue
		}
		fmt.Fprintf(&b, "\n%s %s (%s): %s\n", paint(c.Status, string(c.Status)), c.ID, c.Title, c.Summary)
		for _, d := range c.Details {
			fmt.Fprintf(&b, "  %s\n", d)
		}
		fmt.Fprintf(&b, "  runbook: %s\n", c.Runbook)
	}
	fmt.Fprintf(&b, "\n%s: %d ok, %d warn, %d fail, %d skipped in %s\n", paint(rep.Status, "doctor "+string(rep.Status)),
		rep.Counts[doctor.StatusOK], rep.Counts[doctor.StatusWarn], rep.Counts[doctor.StatusFail], rep.Counts[doctor.StatusSkipped],
		time.Duration(rep.DurationSeconds*float64(time.Second)).Round(time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}

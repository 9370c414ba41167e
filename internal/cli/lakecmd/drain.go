package lakecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
)

// drainer is the lake writer a drain runs (*lakewriter.Drainer).
type drainer interface {
	Run(ctx context.Context) error
	DrainOnce(ctx context.Context) (lakewriter.Summary, error)
	Frontier() int64
}

// DrainOptions are the inputs of `oml lake drain`: its flags, and what its
// run function needs, as functions (NewCmdDrain fills them from the
// Factory; a test replaces them).
type DrainOptions struct {
	IO *iostreams.IOStreams
	// Format is the -o value (an invalid one reads as table, as before).
	Format func() (cliutil.Format, error)
	// Open opens the database, the lake and the signing key, serves the
	// metrics when --metrics-addr is set, applies --memory and builds the
	// lake writer logging to log: the writer, the lake's URL, and a close
	// that stops the metrics server (never nil).
	Open func(ctx context.Context, o *DrainOptions, log *slog.Logger) (d drainer, lake string, closeFn func(), err error)

	Once             bool
	BatchRows        int
	BatchBytes       string
	MaxWait          time.Duration
	PoisonBudget     int
	FailOnDeadLetter bool
	MetricsAddr      string
	Parallel         int
	MaxOpenTables    int
	Memory           string
	memory           int64
	LeaseTTL         time.Duration
	HorizonTimeout   time.Duration
	MaxOutage        time.Duration
	CheckpointEvery  int
	LogLevel         string
	LogFormat        string
	DurableOn        string
	DurableTimeout   time.Duration
	batchBytes       int64
	durable          replication.Policy
}

// NewCmdDrain builds `oml lake drain`; runF replaces the run function in
// tests.
func NewCmdDrain(f *cliutil.Factory, runF func(context.Context, *DrainOptions) error) *cobra.Command {
	opts := &DrainOptions{IO: f.IO, Format: f.Format,
		Open: func(ctx context.Context, o *DrainOptions, log *slog.Logger) (drainer, string, func(), error) {
			return openDrainer(ctx, f, o, log)
		}}
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Run the lake writer: drain the outbox into the Delta tables, exactly once",
		Long: `Run the lake writer. It cuts micro-batches from the outbox's stable prefix
(rows every one of which has committed or can never commit), groups them by
Delta table, and commits each table with a txn action (appId oml-lakewriter,
version = the batch end), then advances the frontier cache. Crashes, retries,
restarts and a second writer never lose or duplicate a row.

With --once it drains up to the stable prefix seen at start and exits (cron).
Without it, it runs until SIGTERM or SIGINT and stops cleanly between batches
(systemd). Only one writer drains at a time (a lease in PostgreSQL); a second
one waits, or with --once says who holds the lease and exits 0.

Every row is checked against the signed journal event it cites before it
enters the lake. A row that fails for a reason of its own (it disagrees with
the journal, its tenant does not exist, an undecodable payload, a missing
held body, a ciphertext digest mismatch) is retried --poison-budget times,
then journalled as materialize.skipped (this needs --signing-key; a row of a
tenant that does not exist is journalled on the provider chain) and moved to
oml.dead_letter. A table that cannot be read for a fault of its own (a
corrupt commit, an unreadable data file) is held and named; the others go
on. A configuration error (credentials the store refuses, no such bucket)
ends --once with exit 2. An outage of the database or the object store is
never a poison row: the writer backs off and retries, with --once for at
most --max-outage (then exit 1).

It never gets ahead of what a failover keeps: a batch is cut only from WAL the
streaming standbys have flushed (pg_stat_replication.flush_lsn). --durable-on
auto (the default) waits for every standby streaming at the time, N for at
least N streaming standbys, none never waits. Waiting is lag, reported with
the standby named; with --once the pass gives up after --durable-timeout and
exits 0 having drained what the standbys hold. The role needs pg_monitor (or
pg_read_all_stats) to see the standbys' positions.

Logs are structured (JSON when stderr is not a terminal). Prometheus metrics
are served on --metrics-addr. See docs/lake-writer.md.`,
		Example: `  oml lake drain --once                       # cron: drain what is there, exit
  oml lake drain --metrics-addr 127.0.0.1:9464  # systemd: run until stopped
  oml lake drain --once --fail-on-dead-letter -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.BatchRows <= 0 {
				return cliutil.FlagErrorf("--batch-rows must be 1 or more")
			}
			n, err := cliutil.ParseBytes(opts.BatchBytes)
			if err != nil || n <= 0 {
				return cliutil.FlagErrorf("--batch-bytes %q: give a size such as 64MiB", opts.BatchBytes)
			}
			opts.batchBytes = n
			if opts.PoisonBudget < 1 {
				return cliutil.FlagErrorf("--poison-budget must be 1 or more")
			}
			if opts.Parallel < 0 {
				return cliutil.FlagErrorf("--parallel must be 1 or more (0: what suits the store)")
			}
			if opts.MaxOpenTables < 1 {
				return cliutil.FlagErrorf("--max-open-tables must be 1 or more")
			}
			if opts.memory, err = cliutil.ParseBytes(opts.Memory); err != nil || opts.memory < 0 {
				return cliutil.FlagErrorf("--memory %q: give a size such as 256MiB (0: no budget)", opts.Memory)
			}
			if opts.MaxOutage <= 0 {
				return cliutil.FlagErrorf("--max-outage must be positive (e.g. 5m)")
			}
			if opts.FailOnDeadLetter && !opts.Once {
				return cliutil.FlagErrorf("--fail-on-dead-letter only applies with --once")
			}
			switch opts.LogFormat {
			case "", "json", "text":
			default:
				return cliutil.FlagErrorf("--log-format must be json or text")
			}
			if opts.durable, err = cliutil.DurableWait(opts.DurableOn, opts.DurableTimeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return drainRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Once, "once", false, "drain up to the stable prefix seen at start, then exit")
	fl.IntVar(&opts.BatchRows, "batch-rows", lakewriter.DefaultBatchRows, "at most this many outbox rows per batch")
	fl.StringVar(&opts.BatchBytes, "batch-bytes", fmt.Sprintf("%dMiB", lakewriter.DefaultBatchBytes>>20), "at most about this many bytes per batch")
	fl.DurationVar(&opts.MaxWait, "max-wait", lakewriter.DefaultMaxWait, "longest a small backlog waits for more rows before a batch is cut")
	fl.IntVar(&opts.PoisonBudget, "poison-budget", lakewriter.DefaultPoisonBudget, "failed attempts before a poison row is dead-lettered")
	fl.BoolVar(&opts.FailOnDeadLetter, "fail-on-dead-letter", false, "with --once: exit 1 if any row was dead-lettered")
	fl.StringVar(&opts.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9464)")
	fl.IntVar(&opts.Parallel, "parallel", lakewriter.DefaultParallel, fmt.Sprintf("tables committed (and opened at start) at once; 0: what suits the store (on a file lake %d while it flushes per file, %d while it shares syncfs rounds: ?sync=file, ?sync=group, or ?sync=auto, the default, per batch as it goes; %d on S3)", store.FileConcurrency, store.FileGroupConcurrency, store.S3Concurrency))
	fl.IntVar(&opts.MaxOpenTables, "max-open-tables", lakewriter.DefaultMaxOpenTables, "Delta table writers kept open between batches; beyond it the least recently used table is reopened from its log when next touched (bounds memory with many tenants)")
	fl.StringVar(&opts.Memory, "memory", fmt.Sprintf("%dMiB", lakewriter.DefaultMemory>>20), fmt.Sprintf("memory budget: %d/4 of it is the Go runtime's soft memory limit, where the heap is collected (unless GOGC or GOMEMLIMIT is set), 1/%d bounds the open table writers' snapshots (least recently used closed first) and 1/%d the rows of the files MERGEs wrote, kept for the next MERGE; 0: no budget beyond --max-open-tables", lakewriter.SoftLimitQuarters, lakewriter.OpenTablesShare, lakewriter.MergeRowsShare))
	fl.DurationVar(&opts.LeaseTTL, "lease-ttl", lakewriter.DefaultLeaseTTL, "lease lifetime; a writer that stops renewing loses it after this")
	fl.DurationVar(&opts.HorizonTimeout, "horizon-timeout", lakewriter.DefaultHorizonTimeout, "with --once: how long to wait for open transactions to end")
	fl.DurationVar(&opts.MaxOutage, "max-outage", lakewriter.DefaultMaxOutage, "with --once: how long to wait out an outage of the database or the store before exiting 1")
	fl.IntVar(&opts.CheckpointEvery, "checkpoint-interval", 0, "write a Delta checkpoint every N commits (0: the table's delta.checkpointInterval, else 100)")
	fl.StringVar(&opts.DurableOn, "durable-on", replication.DefaultPolicyText, replication.FlagUsage)
	fl.DurationVar(&opts.DurableTimeout, "durable-timeout", lakewriter.DefaultDurableTimeout, "with --once: how long to wait for the standbys to flush the stable prefix")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&opts.LogFormat, "log-format", "", "json or text (default: text on a terminal, json otherwise)")
	return cmd
}

func newLogger(ios *iostreams.IOStreams, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, cliutil.FlagErrorf("--log-level %q: use debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lv}
	if format == "text" || (format == "" && ios.IsStderrTTY()) {
		return slog.New(slog.NewTextHandler(ios.ErrOut, ho)), nil
	}
	return slog.New(slog.NewJSONHandler(ios.ErrOut, ho)), nil
}

func drainRun(ctx context.Context, opts *DrainOptions) error {
	format, _ := opts.Format()
	log, err := newLogger(opts.IO, opts.LogLevel, opts.LogFormat)
	if err != nil {
		return err
	}
	d, lake, closeFn, err := opts.Open(ctx, opts, log)
	if err != nil {
		return err
	}
	defer closeFn()
	if !opts.Once {
		log.Info("lake writer starting", "lake", lake)
		err := d.Run(ctx)
		if err != nil {
			return drainError(err)
		}
		log.Info("lake writer stopped cleanly", "frontier", d.Frontier())
		return nil
	}

	sum, err := d.DrainOnce(ctx)
	var nl *lakewriter.NotLeaderError
	if errors.As(err, &nl) {
		fmt.Fprintf(opts.IO.ErrOut, "oml: %s; nothing to do here (another drain is running)\n", nl.Error())
		return nil
	}
	if err != nil {
		return drainError(err)
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, drainJSON(sum)); err != nil {
			return err
		}
	} else if err := printSummary(opts.IO.Out, sum); err != nil {
		return err
	}
	for _, h := range sum.HeldTables {
		fmt.Fprintf(opts.IO.ErrOut, "oml: held table %s (not written): %s\n", h.Table, h.Reason)
	}
	if len(sum.Refused) > 0 {
		for _, r := range sum.Refused {
			fmt.Fprintf(opts.IO.ErrOut, "oml: refused to materialize tenant %s: %s at seq %d: %s%s\n",
				r.Tenant, r.Reason, r.Seq, r.Detail, evidence(r.Evidence))
		}
		return cliutil.Findingsf("%d tenant(s) not materialized because their chain disagrees with its witnessed head; other tenants were drained. Run `oml chain verify` and see docs/runbooks/fork.md", len(sum.Refused))
	}
	if len(sum.HeldTables) > 0 {
		return cliutil.Findingsf("%d table(s) held for a fault of their own and not written; every other table was drained. See docs/runbooks/delta.md", len(sum.HeldTables))
	}
	if len(sum.DeadLettered) > 0 && opts.FailOnDeadLetter {
		return cliutil.Findingsf("%d outbox row(s) were dead-lettered: see `oml deadletter list`", len(sum.DeadLettered))
	}
	return nil
}

// openDrainer is DrainOptions.Open from the Factory.
func openDrainer(ctx context.Context, f *cliutil.Factory, o *DrainOptions, log *slog.Logger) (_ drainer, _ string, _ func(), err error) {
	stop := func() {} // the metrics server's, once it serves
	defer func() {
		if err != nil {
			stop()
		}
	}()
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	lake, err := f.Lake(ctx, "")
	if err != nil {
		return nil, "", nil, err
	}
	// Re-read when the file changes: a rotated key is picked up without a
	// restart (oml key rotate).
	var signer chain.Signer
	if k, err := f.Signer(); err != nil {
		return nil, "", nil, err
	} else if k != nil {
		signer = k
	} else {
		log.Warn("no signing key configured: a poison row that spends its retry budget cannot be dead-lettered and will stop the drain; pass --signing-key or set OML_SIGNING_KEY_FILE")
	}

	var metrics *lakewriter.Metrics
	if o.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		metrics = lakewriter.NewMetrics(reg)
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return nil, "", nil, cliutil.ConfigErrorf("cannot serve metrics on %s: %v", o.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		stop = func() { _ = srv.Close() }
		log.Info("serving Prometheus metrics", "addr", ln.Addr().String(), "path", "/metrics")
	}

	applyMemoryBudget(o.memory, os.Getenv, runtimeKnobs{limit: debug.SetMemoryLimit, percent: debug.SetGCPercent})
	d, err := lakewriter.New(lakewriter.Options{
		DB: pool, Lake: lake, Signer: signer,
		Limits:  outbox.Limits{Rows: o.BatchRows, Bytes: int(o.batchBytes)},
		MaxWait: o.MaxWait, PoisonBudget: o.PoisonBudget, Parallel: o.Parallel,
		MaxOpenTables: o.MaxOpenTables, OpenTablesBytes: o.memory / lakewriter.OpenTablesShare,
		MergeRowsBytes: o.memory / lakewriter.MergeRowsShare,
		LeaseTTL:       o.LeaseTTL, HorizonTimeout: o.HorizonTimeout, MaxOutage: o.MaxOutage,
		CheckpointInterval: o.CheckpointEvery, Log: log, Metrics: metrics,
		Durable: o.durable, DurableTimeout: o.DurableTimeout,
	})
	if err != nil {
		return nil, "", nil, err
	}
	return d, lake.String(), stop, nil
}

// runtimeKnobs are the Go runtime's two garbage-collector settings
// (runtime/debug's SetMemoryLimit and SetGCPercent; a test records them).
type runtimeKnobs struct {
	limit   func(int64) int64
	percent func(int) int
}

// applyMemoryBudget hands the --memory budget to the Go runtime: its soft
// memory limit is lakewriter.SoftLimit of the budget, and the heap is
// collected when it reaches that limit rather than at twice the live heap
// (GOGC=100): peak RSS is then the budget's, not twice whatever the
// caches hold, so it is the same at 1,000 tenants as at 20,000
// (lakewriter.SoftLimitQuarters says why three quarters, and
// docs/lake-writer.md, "A heap sized by the budget", what it costs). The
// environment wins: a GOMEMLIMIT leaves both settings to the runtime (an
// operator who set a limit of their own gets GOGC's collections below it),
// a GOGC leaves the collector's pace to it. A budget of 0 sets neither.
func applyMemoryBudget(budget int64, getenv func(string) string, k runtimeKnobs) {
	if budget <= 0 || getenv("GOMEMLIMIT") != "" {
		return
	}
	k.limit(lakewriter.SoftLimit(budget))
	if getenv("GOGC") == "" {
		k.percent(-1) // after the limit: never unbounded
	}
}

func evidence(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func drainError(err error) error {
	if errors.Is(err, context.Canceled) {
		return cliutil.Findingsf("drain interrupted; it is safe to run again")
	}
	if errors.Is(err, lakewriter.ErrNoSigner) {
		return cliutil.AsConfigError(err)
	}
	// The lake is ahead of / diverged from the database: the drain ran and
	// found a problem (exit 1). A lake of another deployment is a wrong
	// --lake (exit 2).
	var ce *lakewriter.ContinuityError
	if errors.As(err, &ce) {
		if ce.C.State == lakewriter.ContinuityDeployment {
			return cliutil.AsConfigError(ce) // a wrong --lake: configuration
		}
		return cliutil.Findingsf("%s", ce.Error())
	}
	// The store's own sentence names what it refused and what to fix.
	var sce *store.ConfigError
	if errors.As(err, &sce) {
		return cliutil.ConfigErrorf("lake drain: %s", sce.Error())
	}
	var oe *lakewriter.OutageError
	if errors.As(err, &oe) {
		return cliutil.Findingsf("lake drain: %s", oe.Error())
	}
	return cliutil.AsConfigError(fmt.Errorf("lake drain: %w", err))
}

type drainSummaryJSON struct {
	StartFrontier int64 `json:"start_frontier"`
	EndFrontier   int64 `json:"end_frontier"`
	Target        int64 `json:"target"`
	Batches       int   `json:"batches"`
	Rows          int   `json:"rows"` // rows new to the lake in this run
	// ReplayedRows are the rows of the newest recorded batch, re-run at
	// start with its recorded bounds; ReplayedTableCommits is how many
	// tables that replay actually committed to (0: the batch was in every
	// table already, nothing was re-applied). table_commits includes them.
	ReplayedRows         int                    `json:"replayed_rows"`
	ReplayedTableCommits int                    `json:"replayed_table_commits"`
	TableCommits         int                    `json:"table_commits"`
	DeadLettered         []int64                `json:"dead_lettered"`
	Refused              []chainverify.Finding  `json:"refused"`
	HeldTables           []lakewriter.TableHold `json:"held_tables"`
	DurationSeconds      float64                `json:"duration_seconds"`
	HorizonHeld          bool                   `json:"horizon_held"`
	Blockers             []outbox.Blocker       `json:"blockers"`
	// DurabilityHeld: the standbys --durable-on requires did not flush the
	// stable prefix within --durable-timeout (lag, not loss).
	DurabilityHeld bool                 `json:"durability_held"`
	Durability     *replication.Verdict `json:"durability"`
}

func drainJSON(s lakewriter.Summary) drainSummaryJSON {
	out := drainSummaryJSON{StartFrontier: s.StartFrontier, EndFrontier: s.EndFrontier, Target: s.Target,
		Batches: s.Batches, Rows: s.Rows, TableCommits: s.TableCommits, DeadLettered: s.DeadLettered, Refused: s.Refused, HeldTables: s.HeldTables,
		DurationSeconds: s.Duration.Seconds(), HorizonHeld: s.HorizonHeld, Blockers: s.Blockers,
		DurabilityHeld: s.DurabilityHeld, Durability: s.Durability}
	if r := s.Replayed; r != nil {
		out.ReplayedRows, out.ReplayedTableCommits = r.Rows, r.Tables
	}
	out.DeadLettered = cliutil.NonNil(out.DeadLettered)
	out.Refused = cliutil.NonNil(out.Refused)
	out.HeldTables = cliutil.NonNil(out.HeldTables)
	out.Blockers = cliutil.NonNil(out.Blockers)
	return out
}

func printSummary(w io.Writer, s lakewriter.Summary) error {
	dead := "none"
	if len(s.DeadLettered) > 0 {
		var ss []string
		for _, d := range s.DeadLettered {
			ss = append(ss, fmt.Sprint(d))
		}
		dead = fmt.Sprintf("%d (outbox seqs %s): see oml deadletter list", len(s.DeadLettered), strings.Join(ss, ", "))
	}
	pairs := [][2]string{
		{"frontier", fmt.Sprintf("%d -> %d", s.StartFrontier, s.EndFrontier)},
		{"target", fmt.Sprint(s.Target)},
		{"batches", fmt.Sprint(s.Batches)},
		{"new rows", fmt.Sprint(s.Rows)},
	}
	if r := s.Replayed; r != nil {
		what := "already in every table, nothing re-applied"
		if r.Tables > 0 {
			what = fmt.Sprintf("re-applied to %d table(s) an interrupted run had left behind", r.Tables)
		}
		pairs = append(pairs, [2]string{"replayed", fmt.Sprintf("the newest batch (%d, %d], %d row(s): %s", r.Start, r.End, r.Rows, what)})
	}
	pairs = append(pairs, [][2]string{
		{"table commits", fmt.Sprint(s.TableCommits)},
		{"dead-lettered", dead},
		{"took", s.Duration.Round(time.Millisecond).String()},
	}...)
	if s.HorizonHeld {
		pairs = append(pairs, [2]string{"horizon", "held by an open transaction: nothing past the frontier is final yet (lag, not loss)"})
		for _, b := range s.Blockers {
			pairs = append(pairs, [2]string{"  blocker", describeBlocker(b)})
		}
	}
	if s.DurabilityHeld && s.Durability != nil {
		pairs = append(pairs, [2]string{"durability", s.Durability.Reason + " (lag, not loss: nothing past the frontier was cut)"})
		for _, w := range s.Durability.Waiting {
			pairs = append(pairs, [2]string{"  standby", fmt.Sprintf("%s flushed %s, %d bytes behind", w.Name, w.Flush, w.BehindBytes)})
		}
	}
	return cliutil.KeyValues(w, pairs)
}

func describeBlocker(b outbox.Blocker) string {
	if b.Kind == "prepared" {
		return fmt.Sprintf("prepared transaction %q in database %s (xid %d, since %s)", b.GID, b.Database, b.Xid, cliutil.Time(b.XactStart))
	}
	state := b.State
	if state == "" {
		state = "unknown state"
	}
	return fmt.Sprintf("pid %d in database %s, user %s, app %q, %s, transaction open since %s (%s)",
		b.PID, b.Database, b.User, b.Application, state, cliutil.Time(b.XactStart), time.Since(b.XactStart).Round(time.Second))
}

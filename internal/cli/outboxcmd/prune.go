package outboxcmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
)

// PruneOptions are the inputs of `oml outbox prune`: its flags, and what
// its run function needs, as functions (NewCmdPrune fills them from the
// Factory; a test replaces them).
type PruneOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open returns the owner's pool and the lake.
	Open func(ctx context.Context) (*pgxpool.Pool, store.Store, error)
	// Prune is outboxprune.Run: it plans (DryRun) or prunes.
	Prune func(ctx context.Context, o outboxprune.Options) (outbox.PruneResult, error)

	OlderThan string
	DryRun    bool
	Yes       bool
	BatchRows int

	olderThan time.Duration
}

// NewCmdPrune builds `oml outbox prune`.
func NewCmdPrune(f *cliutil.Factory, runF func(context.Context, *PruneOptions) error) *cobra.Command {
	opts := &PruneOptions{
		IO:     f.IO,
		Format: f.Format,
		Open:   func(ctx context.Context) (*pgxpool.Pool, store.Store, error) { return open(ctx, f) },
		Prune:  outboxprune.Run,
	}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete outbox rows every lake table has applied, older than the retention",
		Long: `Delete the outbox rows that every table they target has applied — at or
below that table's lake-writer txn version (read from its Delta log, so
--lake is needed) and at or below the frontier cache — and that are older
than --older-than (default 7d). Rows go in short transactions of
--batch-rows each; neither the application's appends nor the lake writer
wait on them for longer than one batch.

Never deleted: a dead-lettered row (open, re-enqueued or abandoned), a
re-enqueued dead letter's copy and every row after it in its table, a row of
a table the lake does not hold, or any row when a table's log cannot be read
or the lake does not share the database's history (the lake writer's
continuity check; exit 1). A table rebuilt later gets its pruned rows back
from the journal.

Runs as the owner (the role that runs oml migrate): the lake writer role may
not delete outbox rows. On a terminal it shows what it would delete and asks;
without a terminal it only shows it unless --yes. See docs/outbox.md.`,
		Example: `  oml outbox prune --dry-run
  oml outbox prune --older-than 14d --yes
  oml outbox prune --yes -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := cliutil.ParseRetention(opts.OlderThan)
			if err != nil {
				return cliutil.FlagErrorf("--older-than: %v", err)
			}
			if opts.BatchRows <= 0 {
				return cliutil.FlagErrorf("--batch-rows must be a positive number of rows")
			}
			opts.olderThan = d
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return pruneRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.OlderThan, "older-than", "7d", "only rows created longer ago than this (7d, 36h; 0s: every applied row)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "show what would be deleted; delete nothing")
	fl.BoolVarP(&opts.Yes, "yes", "y", false, "delete without asking")
	fl.IntVar(&opts.BatchRows, "batch-rows", outbox.DefaultPruneBatch, "rows deleted per transaction")
	return cmd
}

func open(ctx context.Context, f *cliutil.Factory) (*pgxpool.Pool, store.Store, error) {
	lake, err := f.Lake(ctx, "oml outbox prune reads what the lake has applied from its Delta logs: pass --lake file:///abs/path or s3://bucket/prefix, or set OML_LAKE_URL")
	if err != nil {
		return nil, nil, err
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pool, lake, nil
}

// Classify turns a prune error into the command's exit: a refusal for
// continuity is a finding (1), an unreadable lake, a missing privilege or
// a connection problem a configuration error (2).
func Classify(err error) error {
	var refused *outboxprune.RefusedError
	var lakeErr *outboxprune.LakeError
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return cliutil.Findingsf("%s", refused.Error())
	case errors.As(err, &lakeErr):
		return cliutil.AsConfigError(err)
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return cliutil.ConfigErrorf("this role may not delete outbox rows (%s): run oml outbox prune as the owner, the role that runs oml migrate", pgErr.Message)
	}
	return cliutil.AsConfigError(err)
}

func pruneRun(ctx context.Context, opts *PruneOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	pool, lake, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	prune := outboxprune.Options{DB: pool, Lake: lake, OlderThan: opts.olderThan, BatchRows: opts.BatchRows}
	if !opts.Yes || opts.DryRun {
		dry := prune
		dry.DryRun = true
		plan, err := opts.Prune(ctx, dry)
		if err != nil {
			return Classify(err)
		}
		if opts.DryRun || plan.Rows == 0 || !opts.IO.IsStdinTTY() {
			if err := Write(opts.IO, format, plan); err != nil {
				return err
			}
			if !opts.DryRun && plan.Rows > 0 {
				fmt.Fprintln(opts.IO.ErrOut, "Nothing deleted: stdin is not a terminal to confirm on; pass --yes to delete.")
			}
			return nil
		}
		if err := Write(opts.IO, format, plan); err != nil {
			return err
		}
		if !cliutil.Confirm(opts.IO, fmt.Sprintf("Delete these %d outbox rows? [y/N] ", plan.Rows)) {
			fmt.Fprintln(opts.IO.ErrOut, "Nothing deleted.")
			return nil
		}
	}
	res, err := opts.Prune(ctx, prune)
	if err != nil {
		return Classify(err)
	}
	return Write(opts.IO, format, res)
}

// Write writes a prune result: one JSON document, or a table per pruned
// table and a summary line.
func Write(io *iostreams.IOStreams, format cliutil.Format, res outbox.PruneResult) error {
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(io.Out, res)
	}
	verb := "Deleted"
	if res.DryRun {
		verb = "Would delete"
	}
	if len(res.Tables) > 0 {
		rows := make([][]string, 0, len(res.Tables))
		for _, t := range res.Tables {
			oldest := "-"
			if t.Oldest != nil {
				oldest = cliutil.Time(*t.Oldest)
			}
			stop := t.StoppedBy
			if stop == "" {
				stop = "txn version"
			}
			rows = append(rows, []string{t.Tenant.String(), t.Target, fmt.Sprint(t.TxnVersion), fmt.Sprint(t.Through), fmt.Sprint(t.Rows), oldest, stop})
		}
		if err := cliutil.Table(io, []string{"TENANT", "TABLE", "TXN VERSION", "THROUGH SEQ", "ROWS", "OLDEST", "BOUND BY"}, rows); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(io.Out, "%s %d outbox rows (frontier %d, created before %s) in %d batches, longest %s; %d dead-lettered rows kept.\n",
		verb, res.Rows, res.Frontier, cliutil.Time(res.Cutoff), res.Batches, res.MaxBatch.Round(time.Microsecond), res.KeptDead)
	return err
}

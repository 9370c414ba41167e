package deadlettercmd

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/iostreams"
)

// ReenqueueOptions are `oml deadletter reenqueue`'s flags and what its run
// function needs, as functions (NewCmdReenqueue fills them from the
// Factory; a test replaces them).
type ReenqueueOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open loads the deployment key, then opens the database.
	Open OpenForAppend
	// OpenIDs resolves tenant (a name or id, "" for every tenant) and lists
	// its open dead letters, for --all; its errors are the command's.
	OpenIDs func(ctx context.Context, pool *pgxpool.Pool, tenant string) ([]int64, error)
	// StillBroken says why dead letter id's cause visibly still holds
	// (deadletter.StillBroken), "" when it does not or the id is unknown
	// (Reenqueue reports those); its errors are the command's.
	StillBroken func(ctx context.Context, pool *pgxpool.Pool, id int64) (string, error)
	// Reenqueue is deadletter.Reenqueue.
	Reenqueue Repair[deadletter.Options]

	IDs    []int64
	All    bool
	Tenant string
	Yes    bool
	Reason string
	By     string
	// Force re-enqueues rows whose cause still shows (deadletter.StillBroken).
	Force bool
}

// NewCmdReenqueue builds `oml deadletter reenqueue`.
func NewCmdReenqueue(f *cliutil.Factory, runF func(context.Context, *ReenqueueOptions) error) *cobra.Command {
	opts := &ReenqueueOptions{
		IO:     f.IO,
		Format: f.Format,
		Open:   openForAppend(f, "re-enqueueing"),
		OpenIDs: func(ctx context.Context, pool *pgxpool.Pool, tenant string) ([]int64, error) {
			tn, err := resolveTenant(ctx, f, tenant)
			if err != nil {
				return nil, err
			}
			ids, err := deadletter.OpenIDs(ctx, pool, tn)
			if err != nil {
				return nil, cliutil.AsConfigError(err)
			}
			return ids, nil
		},
		StillBroken: stillBroken,
		Reenqueue:   deadletter.Reenqueue,
	}
	cmd := &cobra.Command{
		Use:   "reenqueue ID... | --all [--tenant T]",
		Short: "Put repaired dead letters back into the outbox (a journalled deadletter.reenqueued per dead letter)",
		Long: `Re-enqueue dead letters after their cause is repaired. For each one, in one
PostgreSQL transaction: append a deadletter.reenqueued event to the tenant's
chain (who: --by, why: --reason, which dead letter), insert a new outbox row
carrying the original operation, and mark the dead letter re-enqueued with the
new seq. Then run oml lake drain.

The operation re-enqueued is the one the journal implies: when the stored
payload disagrees with it (a damaged outbox payload), the journal's is used
and the journalled reason says so.

A dead letter that was already re-enqueued is left alone and reported as such.
--all asks for confirmation on a terminal; scripts pass --yes. Needs the
deployment key (--signing-key / OML_SIGNING_KEY_FILE).
Exit status: 0 every dead letter re-enqueued or already re-enqueued; 1 some
could not be (not found, or the append was refused); 2 usage or connection error.`,
		Example: `  oml deadletter reenqueue 3 --reason "restored the held body from backup"
  oml deadletter reenqueue --all --tenant acme --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.All && len(args) > 0 {
				return cliutil.FlagErrorf("give dead letter ids or --all, not both")
			}
			if !opts.All && len(args) == 0 {
				return cliutil.FlagErrorf("name the dead letters to re-enqueue (ids from oml deadletter list) or pass --all")
			}
			if opts.Tenant != "" && !opts.All {
				return cliutil.FlagErrorf("--tenant only narrows --all; with ids, the ids say which dead letters")
			}
			if opts.All && !opts.Yes && !opts.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("--all re-enqueues every open dead letter and stdin is not a terminal to confirm on: pass --yes")
			}
			var err error
			if opts.IDs, opts.By, err = repairArgs(args, opts.By); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return reenqueueRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "re-enqueue every open dead letter (of --tenant, if given)")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "with --all: only this tenant (name or id)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (journalled with the event)")
	cmd.Flags().StringVar(&opts.By, "by", "", "who is re-enqueueing (journalled; default: the OS user)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "re-enqueue even rows whose cause is visibly not repaired (they will dead-letter again)")
	return cmd
}

func reenqueueRun(ctx context.Context, opts *ReenqueueOptions) error {
	format, _ := opts.Format()
	k, pool, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	ids := opts.IDs
	if opts.All {
		if ids, err = opts.OpenIDs(ctx, pool, opts.Tenant); err != nil {
			return err
		}
		if len(ids) == 0 {
			if format == cliutil.FormatJSON {
				return cliutil.WriteJSON(opts.IO.Out, []deadletter.Result{})
			}
			_, err := fmt.Fprintln(opts.IO.Out, "No open dead letters: nothing to re-enqueue.")
			return err
		}
		if !cliutil.Confirmed(opts.IO, opts.Yes, fmt.Sprintf("Re-enqueue %d open dead letter(s) as %s? [y/N] ", len(ids), opts.By), "Nothing re-enqueued.") {
			return nil
		}
	}
	ids, broken, err := unrepaired(ctx, opts, pool, ids)
	if err != nil {
		return err
	}
	for _, b := range broken {
		fmt.Fprintf(opts.IO.ErrOut, "oml: dead letter %d was NOT re-enqueued: %s, so the lake writer would dead-letter it again; repair it first (docs/deadletter.md), or pass --force\n", b.id, b.why)
	}
	if len(ids) == 0 {
		return cliutil.Findingsf("%d dead letter(s) not re-enqueued: their cause is not repaired", len(broken))
	}
	res, err := opts.Reenqueue(ctx, pool, k, ids, deadletter.Options{By: opts.By, Reason: opts.Reason})
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	failed, done := 0, 0
	for _, r := range res {
		switch r.Outcome {
		case deadletter.OutcomeFailed, deadletter.OutcomeNotFound, deadletter.OutcomeRefusedAbandoned:
			failed++
		case deadletter.OutcomeReenqueued:
			done++
		}
	}
	if err := writeResults(opts.IO, format, res, reenqueuedLine); err != nil {
		return err
	}
	if format != cliutil.FormatJSON && done > 0 {
		fmt.Fprintln(opts.IO.Out, "Run oml lake drain to apply the re-enqueued rows.")
	}
	if failed > 0 {
		return cliutil.Findingsf("%d of %d dead letter(s) could not be re-enqueued", failed, len(res))
	}
	if len(broken) > 0 {
		return cliutil.Findingsf("%d dead letter(s) not re-enqueued: their cause is not repaired", len(broken))
	}
	return nil
}

// reenqueuedLine is what reenqueue says about one dead letter, sanitized:
// By and Error are untrusted text.
func reenqueuedLine(r deadletter.Result) string {
	var line string
	switch r.Outcome {
	case deadletter.OutcomeReenqueued:
		line = fmt.Sprintf("Re-enqueued dead letter %d (outbox seq %d) as outbox seq %d: journal seq %d deadletter.reenqueued by %s.",
			r.ID, r.OutboxSeq, r.NewOutboxSeq, r.JournalSeq, r.By)
		if r.PayloadRederived {
			line += " The payload was re-derived from the journal (the dead-lettered one disagreed with it)."
		}
	case deadletter.OutcomeAlreadyReenqueued:
		line = fmt.Sprintf("Dead letter %d was already re-enqueued at %s by %s (outbox seq %d, journal seq %d); nothing to do.",
			r.ID, timeOr(r.At), r.By, r.NewOutboxSeq, r.JournalSeq)
	default:
		line = fmt.Sprintf("Dead letter %d was NOT re-enqueued: %s", r.ID, r.Error)
	}
	return cliutil.Sanitize(line)
}

type brokenLetter struct {
	id  int64
	why string
}

// unrepaired splits ids into those to re-enqueue and those whose cause
// visibly still holds (opts.StillBroken); with --force nothing is held
// back.
func unrepaired(ctx context.Context, opts *ReenqueueOptions, pool *pgxpool.Pool, ids []int64) ([]int64, []brokenLetter, error) {
	if opts.Force {
		return ids, nil, nil
	}
	var keep []int64
	var broken []brokenLetter
	for _, id := range ids {
		why, err := opts.StillBroken(ctx, pool, id)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			broken = append(broken, brokenLetter{id, why})
			continue
		}
		keep = append(keep, id)
	}
	return keep, broken, nil
}

// stillBroken is ReenqueueOptions.StillBroken over the database. An id it
// cannot read is not held back: Reenqueue reports it.
func stillBroken(ctx context.Context, pool *pgxpool.Pool, id int64) (string, error) {
	l, err := deadletter.Get(ctx, pool, id)
	if err != nil {
		return "", nil
	}
	why, err := deadletter.StillBroken(ctx, pool, l)
	if err != nil {
		return "", cliutil.AsConfigError(err)
	}
	return why, nil
}

package deadlettercmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/iostreams"
)

// AbandonOptions are `oml deadletter abandon`'s flags and what its run
// function needs, as functions (NewCmdAbandon fills them from the Factory;
// a test replaces them).
type AbandonOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open loads the deployment key, then opens the database.
	Open OpenForAppend
	// Abandon is deadletter.Abandon.
	Abandon Repair[deadletter.AbandonOptions]

	IDs    []int64
	Yes    bool
	Reason string
	By     string
}

// NewCmdAbandon builds `oml deadletter abandon`.
func NewCmdAbandon(f *cliutil.Factory, runF func(context.Context, *AbandonOptions) error) *cobra.Command {
	opts := &AbandonOptions{IO: f.IO, Format: f.Format, Open: openForAppend(f, "abandoning"), Abandon: deadletter.Abandon}
	cmd := &cobra.Command{
		Use:   "abandon ID... --reason R",
		Short: "Accept for good that dead letters will never reach the lake (a journalled deadletter.abandoned per dead letter)",
		Long: `Close dead letters that can never be repaired — a held body that is gone for
good, with no backup and no writer that still has it. For each one, in one
PostgreSQL transaction: append a deadletter.abandoned event to the tenant's
chain (who: --by, why: --reason, which dead letter) and mark the dead letter
abandoned.

Afterwards the dead letter is no longer open: doctor and status stop counting
it, reconcile lists the row as an accepted gap (not a failure), and
oml deadletter reenqueue refuses it. The loss stays in the chain for ever.
This cannot be undone: try a repair first (docs/deadletter.md).

Asks for confirmation on a terminal; scripts pass --yes. Needs the deployment
key (--signing-key / OML_SIGNING_KEY_FILE).
Exit status: 0 every dead letter abandoned or already abandoned; 1 some could
not be (not found, already re-enqueued, or the append was refused); 2 usage or
connection error.`,
		Example: `  oml deadletter abandon 7 --reason "held body lost with the old primary; no backup holds it"
  oml deadletter abandon 7 8 --reason "..." --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cliutil.FlagErrorf("name the dead letters to abandon (ids from oml deadletter list)")
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return cliutil.FlagErrorf("--reason is required: say why these rows can never be repaired (it is journalled)")
			}
			if !opts.Yes && !opts.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("abandoning is permanent and stdin is not a terminal to confirm on: pass --yes")
			}
			var err error
			if opts.IDs, opts.By, err = repairArgs(args, opts.By); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return abandonRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the rows can never be repaired (required; journalled)")
	cmd.Flags().StringVar(&opts.By, "by", "", "who is abandoning them (journalled; default: the OS user)")
	return cmd
}

func abandonRun(ctx context.Context, opts *AbandonOptions) error {
	format, _ := opts.Format()
	k, pool, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	if !cliutil.Confirmed(opts.IO, opts.Yes, fmt.Sprintf("Abandon %d dead letter(s) for good as %s? They will never reach the lake. [y/N] ", len(opts.IDs), opts.By), "Nothing abandoned.") {
		return nil
	}
	res, err := opts.Abandon(ctx, pool, k, opts.IDs, deadletter.AbandonOptions{By: opts.By, Reason: opts.Reason})
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	failed := 0
	for _, r := range res {
		if r.Outcome != deadletter.OutcomeAbandoned && r.Outcome != deadletter.OutcomeAlreadyAbandoned {
			failed++
		}
	}
	if err := writeResults(opts.IO, format, res, abandonedLine); err != nil {
		return err
	}
	if failed > 0 {
		return cliutil.Findingsf("%d of %d dead letter(s) could not be abandoned", failed, len(res))
	}
	return nil
}

// abandonedLine is what abandon says about one dead letter.
func abandonedLine(r deadletter.Result) string {
	switch r.Outcome {
	case deadletter.OutcomeAbandoned:
		return fmt.Sprintf("Abandoned dead letter %d (outbox seq %d): journal seq %d deadletter.abandoned by %s; reconcile lists it as an accepted gap.",
			r.ID, r.OutboxSeq, r.JournalSeq, r.By)
	case deadletter.OutcomeAlreadyAbandoned:
		return fmt.Sprintf("Dead letter %d was already abandoned at %s by %s (journal seq %d); nothing to do.", r.ID, timeOr(r.At), r.By, r.JournalSeq)
	default:
		return fmt.Sprintf("Dead letter %d was NOT abandoned: %s", r.ID, r.Error)
	}
}

package deadlettercmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/iostreams"
)

// ListOptions are `oml deadletter list`'s flags and what its run function
// needs, as functions (NewCmdList fills them from the Factory; a test
// replaces them).
type ListOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Letters opens the database, resolves the --tenant filter (tenant: a
	// name or id, "" for every tenant) into o and lists (deadletter.List);
	// its errors are the command's.
	Letters func(ctx context.Context, tenant string, o deadletter.ListOptions) ([]deadletter.Letter, error)

	Tenant string
	Since  time.Duration
	All    bool
}

// NewCmdList builds `oml deadletter list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IO, Format: f.Format, Letters: func(ctx context.Context, tenant string, o deadletter.ListOptions) ([]deadletter.Letter, error) {
		pool, err := f.CurrentDB(ctx)
		if err != nil {
			return nil, err
		}
		if o.Tenant, err = resolveTenant(ctx, f, tenant); err != nil {
			return nil, err
		}
		ls, err := deadletter.List(ctx, pool, o)
		if err != nil {
			return nil, cliutil.AsConfigError(err)
		}
		return ls, nil
	}}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters (open ones; --all includes re-enqueued ones)",
		Long: `List dead letters, oldest first: id, tenant, outbox seq, target, op, claim,
attempts, first failure, the error, and whether it was re-enqueued.

By default only open dead letters (not yet re-enqueued) are listed.
Exit status: 0 (also when there are open dead letters: this is a view; use
oml reconcile to fail on them); 2 usage or connection error.`,
		Example: `  oml deadletter list
  oml deadletter list --tenant acme --since 24h
  oml deadletter list --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Since < 0 {
				return cliutil.FlagErrorf("--since must be a positive duration such as 24h")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant (name or id)")
	cmd.Flags().DurationVar(&opts.Since, "since", 0, "only dead letters that first failed within this long (e.g. 24h)")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include dead letters that were already re-enqueued")
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	format, _ := opts.Format()
	lo := deadletter.ListOptions{All: opts.All}
	if opts.Since > 0 {
		lo.Since = time.Now().Add(-opts.Since)
	}
	ls, err := opts.Letters(ctx, opts.Tenant, lo)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, ls)
	}
	if len(ls) == 0 {
		what := "open dead letters"
		if opts.All {
			what = "dead letters"
		}
		_, err := fmt.Fprintf(opts.IO.Out, "No %s.\n", what)
		return err
	}
	rows := make([][]string, 0, len(ls))
	for _, l := range ls {
		re := "no"
		if l.Reenqueued {
			re = fmt.Sprintf("yes, %s (outbox seq %d)", cliutil.Time(*l.ReenqueuedAt), deref(l.NewOutboxSeq))
		}
		if l.Abandoned {
			re = fmt.Sprintf("abandoned, %s (journal seq %d)", cliutil.Time(*l.AbandonedAt), deref(l.AbandonedSeq))
		}
		rows = append(rows, []string{fmt.Sprint(l.ID), tenantLabel(l), fmt.Sprint(l.OutboxSeq), l.Target, l.Op, l.Claim(),
			fmt.Sprint(l.Attempts), cliutil.Time(l.FirstFailedAt), re, oneLine(l.Error, opts.IO.IsStdoutTTY())})
	}
	// ERROR last: it is the long free text, the one column a terminal
	// table wraps (cliutil.FitTable).
	return cliutil.Table(opts.IO, []string{"ID", "TENANT", "OUTBOX SEQ", "TARGET", "OP", "CLAIM", "ATTEMPTS", "FIRST FAILURE", "REENQUEUED", "ERROR"}, rows)
}

func tenantLabel(l deadletter.Letter) string {
	if l.TenantName != "" {
		return l.TenantName
	}
	return l.TenantID.String()
}

// oneLine keeps a table cell on one line, shortened on a terminal.
func oneLine(s string, short bool) string {
	s = strings.Join(strings.Fields(s), " ")
	if short && len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}

package chaincmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/recovery"
)

// AcceptForkOptions are `oml chain accept-fork`'s flags and what its run
// function needs, as functions (NewCmdAcceptFork fills them from the
// Factory; a test replaces them).
type AcceptForkOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open requires a lake, loads the deployment key and opens the
	// database and the lake.
	Open openRecovery
	// ResolveTenant resolves --tenant (a name, an id or the provider).
	ResolveTenant func(ctx context.Context, pool *pgxpool.Pool, tenant string) (uuid.UUID, error)
	// Accept is recovery.AcceptFork: it plans (DryRun) or journals.
	Accept func(ctx context.Context, o recovery.AcceptOptions) (*recovery.AcceptResult, error)

	Tenant string
	Reason string
	Yes    bool
	By     string
}

// NewCmdAcceptFork builds `oml chain accept-fork`.
func NewCmdAcceptFork(f *cliutil.Factory, runF func(context.Context, *AcceptForkOptions) error) *cobra.Command {
	opts := &AcceptForkOptions{IO: f.IO, Format: f.Format, ResolveTenant: resolveTenant, Accept: recovery.AcceptFork,
		Open: openForRecovery(f, "no lake configured: set --lake or OML_LAKE_URL to the lake whose witnesses and bronze.events saw the lost history",
			"accept-fork journals chain.fork_accepted and needs the deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE")}
	cmd := &cobra.Command{
		Use:   "accept-fork",
		Short: "Accept that a tenant's journal forked from (or lost) the history its witness and bronze saw",
		Long: `When the database already wrote over a lost tail (a failover to a standby
that had not received every commit, and the application went on writing),
the journal wins: accept-fork journals, on the provider chain, a
chain.fork_accepted event naming the lost heads (the witnessed head and the
newest bronze event that the journal no longer holds), the last seq both
histories share, and the journal's new head. Afterwards oml chain verify,
oml chain head, oml doctor and the fork check list the fork as accepted
instead of failing, the lake writer stops holding the tenant, and the
witness publisher signs the new heads. The loss stays listed for ever.

The lake's tables still hold the lost history: rewind them with
oml lake repair --tenant T (docs/runbooks/failover.md). A lost tail that
restore-tail can bring back (bronze holds it and nothing was appended since)
is refused: restore it instead.

Asks for confirmation on a terminal unless --yes. Needs --lake and
--signing-key.
Exit status: 0 accepted (or already accepted); 2 usage or connection error,
nothing to accept, or the tail can be restored instead.`,
		Example: `  oml chain accept-fork --tenant acme --reason "failover to db-2 at 03:12, 170 events lost"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Tenant == "" {
				return cliutil.FlagErrorf("--tenant is required: a fork is accepted one chain at a time")
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return cliutil.FlagErrorf("--reason is required: say what happened (it is journalled)")
			}
			var err error
			if opts.By, err = cliutil.JournalledBy(opts.By); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return acceptForkRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Tenant, "tenant", "", "the forked chain (tenant name or id, or provider)")
	fl.StringVar(&opts.Reason, "reason", "", "what happened (journalled)")
	fl.BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	fl.StringVar(&opts.By, "by", "", "who accepts (journalled; default: the OS user)")
	return cmd
}

func acceptForkRun(ctx context.Context, opts *AcceptForkOptions) error {
	format, _ := opts.Format()
	k, pool, st, err := opts.Open(ctx, false)
	if err != nil {
		return err
	}
	id, err := opts.ResolveTenant(ctx, pool, opts.Tenant)
	if err != nil {
		return err
	}
	ao := recovery.AcceptOptions{Pool: pool, Lake: st, Tenant: id, Reason: opts.Reason, By: opts.By, DryRun: true}
	res, err := opts.Accept(ctx, ao)
	if errors.Is(err, recovery.ErrNothingToAccept) || errors.Is(err, recovery.ErrRestorable) {
		return cliutil.ConfigErrorf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if !res.AlreadyAccepted {
		if format != cliutil.FormatJSON {
			printAccept(opts.IO, res)
		}
		if err := confirm(opts.IO, opts.Yes, fmt.Sprintf("Journal on the provider chain that tenant %s's journal wins over the lost history, as %s? [y/N] ", id, opts.By), "Nothing accepted."); err != nil {
			return err
		}
		ao.DryRun, ao.Signer = false, k
		if res, err = opts.Accept(ctx, ao); err != nil {
			return cliutil.AsConfigError(err)
		}
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	if res.AlreadyAccepted {
		_, err := fmt.Fprintf(opts.IO.Out, "The fork of tenant %s is already accepted: nothing to do.\n", id)
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Accepted the fork of tenant %s: journalled chain.fork_accepted at provider seq %d. Next: oml lake repair --tenant %s rewinds its tables to seq %d (docs/runbooks/failover.md).\n",
		id, res.ProviderSeq, id, res.SharedSeq)
	return err
}

func printAccept(io *iostreams.IOStreams, res *recovery.AcceptResult) {
	for _, l := range res.Lost {
		fmt.Fprintf(io.ErrOut, "lost head (%s): seq %d hash %s\n", l.Source, l.Seq, l.Hash)
	}
	fmt.Fprintf(io.ErrOut, "shared with the journal up to seq %d; journal head now seq %d hash %s\n", res.SharedSeq, res.NewSeq, res.NewHash)
}

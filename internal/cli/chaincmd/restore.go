package chaincmd

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/recovery"
)

// RestoreTailOptions are `oml chain restore-tail`'s flags and what its run
// function needs, as functions (NewCmdRestoreTail fills them from the
// Factory; a test replaces them).
type RestoreTailOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open requires a lake, loads the deployment key unless dryRun, and
	// opens the database and the lake.
	Open openRecovery
	// OnlyTenant resolves --tenant: nil (every chain) when it is empty.
	OnlyTenant func(ctx context.Context, pool *pgxpool.Pool, tenant string) (*uuid.UUID, error)
	// Restore is recovery.RestoreTail: it plans (DryRun) or restores.
	Restore func(ctx context.Context, o recovery.RestoreOptions) (*recovery.RestoreResult, error)

	Tenant string
	DryRun bool
	Yes    bool
	By     string
}

// NewCmdRestoreTail builds `oml chain restore-tail`.
func NewCmdRestoreTail(f *cliutil.Factory, runF func(context.Context, *RestoreTailOptions) error) *cobra.Command {
	opts := &RestoreTailOptions{IO: f.IO, Format: f.Format, OnlyTenant: onlyTenant, Restore: recovery.RestoreTail,
		Open: openForRecovery(f, "no lake configured: set --lake or OML_LAKE_URL to the lake whose bronze.events holds the lost events",
			"restore-tail journals chain.tail_restored and needs the deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE (or use --dry-run)")}
	cmd := &cobra.Command{
		Use:   "restore-tail",
		Short: "Re-insert the events a failover or restore lost, from the lake's bronze.events",
		Long: `After a failover to a standby that had not received every commit, or a
point-in-time restore, a chain's journal can end below what the lake's
bronze.events (and the witnessed heads) hold: its tail was lost. When nothing
was appended to that chain since, the lost events are still in bronze, each
row the full signed envelope. restore-tail puts them back:

  - every bronze row is verified against the chain first (seq, prev_hash
    link, recomputed hash, signature under a key the provider chain issued,
    canonical payload); a row that fails is named and its chain is not
    touched;
  - the events are inserted in seq order and the fold they imply is rebuilt
    (claims, dead letters), the outbox rows the lake already applied are put
    back at their seqs and the outbox sequence is moved past every table's
    txn version, so no new row reuses a seq the lake has applied;
  - claims submitted in the lost tail and still held come back held without
    their body (held bodies never reach the lake) and are listed;
  - the restore itself is journalled as chain.tail_restored on the chain.

The provider chain is restored first, then every tenant (or only --tenant).
Each chain is one transaction: a crash leaves it as it was, and running the
command again finishes the work. A chain the database already wrote over is a
fork: it is refused; see oml chain accept-fork and docs/runbooks/failover.md.

Asks for confirmation on a terminal unless --yes; --dry-run prints the plan
and writes nothing. Needs --lake and, unless --dry-run, --signing-key.
Exit status: 0 every lost tail restored (or none lost); 1 a chain could not
be restored (refused: see the problem); 2 usage or connection error.`,
		Example: `  oml chain restore-tail --dry-run
  oml chain restore-tail --yes
  oml chain restore-tail --tenant acme -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.By, err = cliutil.JournalledBy(opts.By); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return restoreTailRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Tenant, "tenant", "", "restore only this chain (tenant name or id, or provider)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "verify and print the plan; write nothing")
	fl.BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	fl.StringVar(&opts.By, "by", "", "who is restoring (journalled; default: the OS user)")
	return cmd
}

// openRecovery is what restore-tail and accept-fork open, in this order:
// a lake must be configured, the deployment key (unless dryRun: then nil),
// the database, the lake.
type openRecovery func(ctx context.Context, dryRun bool) (*keys.Key, *pgxpool.Pool, store.Store, error)

// openForRecovery is an openRecovery over the Factory; noLake and noKey
// are the sentences to fail with when the lake or the key is missing.
func openForRecovery(f *cliutil.Factory, noLake, noKey string) openRecovery {
	return func(ctx context.Context, dryRun bool) (*keys.Key, *pgxpool.Pool, store.Store, error) {
		if f.LakeURL() == "" {
			return nil, nil, nil, cliutil.ConfigErrorf("%s", noLake)
		}
		var signer *keys.Key
		if !dryRun {
			k, err := f.SigningKey(noKey)
			if err != nil {
				return nil, nil, nil, err
			}
			signer = k
		}
		pool, err := f.DB(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		st, err := f.OptionalLake(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		return signer, pool, st, nil
	}
}

// confirm asks on a terminal (without one, --yes is required): nil to go
// on; a no says declined on stderr and is cliutil.ErrSilent.
func confirm(io *iostreams.IOStreams, yes bool, prompt, declined string) error {
	if yes {
		return nil
	}
	if !io.IsStdinTTY() {
		return cliutil.FlagErrorf("refusing to change the journal without confirmation: stdin is not a terminal; pass --yes")
	}
	fmt.Fprint(io.ErrOut, prompt)
	line, err := bufio.NewReader(io.In).ReadString('\n')
	if err == nil || line != "" {
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return nil
		}
	}
	fmt.Fprintln(io.ErrOut, declined)
	return cliutil.ErrSilent
}

func restoreTailRun(ctx context.Context, opts *RestoreTailOptions) error {
	format, _ := opts.Format()
	signer, pool, st, err := opts.Open(ctx, opts.DryRun)
	if err != nil {
		return err
	}
	ro := recovery.RestoreOptions{Pool: pool, Lake: st, DryRun: true, By: opts.By}
	if ro.Tenant, err = opts.OnlyTenant(ctx, pool, opts.Tenant); err != nil {
		return err
	}
	res, err := opts.Restore(ctx, ro)
	if err != nil {
		return cliutil.AsConfigError(fmt.Errorf("plan the restore: %w", err))
	}
	restorable := 0
	for _, t := range res.Tenants {
		if t.Status == recovery.StatusRestorable {
			restorable++
		}
	}
	if !opts.DryRun && restorable > 0 {
		if format != cliutil.FormatJSON {
			if err := printRestore(opts.IO, res); err != nil {
				return err
			}
		}
		if err := confirm(opts.IO, opts.Yes, fmt.Sprintf("Restore the lost tail of %d chain(s) from bronze.events, as %s? [y/N] ", restorable, opts.By), "Nothing restored."); err != nil {
			return err
		}
		ro.DryRun, ro.Signer = false, signer
		if res, err = opts.Restore(ctx, ro); err != nil {
			return cliutil.AsConfigError(fmt.Errorf("restore: %w", err))
		}
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, res); err != nil {
			return err
		}
	} else if err := printRestore(opts.IO, res); err != nil {
		return err
	}
	if n := res.Refused(); n > 0 {
		return cliutil.Findingsf("%d chain(s) could not be restored: see the problems above (docs/runbooks/failover.md)", n)
	}
	return nil
}

func printRestore(io *iostreams.IOStreams, res *recovery.RestoreResult) error {
	rows := make([][]string, 0, len(res.Tenants))
	for _, t := range res.Tenants {
		span := "-"
		if t.Events > 0 {
			span = fmt.Sprintf("%d..%d", t.FromSeq, t.ToSeq)
		}
		rows = append(rows, []string{t.Tenant.String(), t.Name, t.Status, fmt.Sprint(t.JournalSeq), fmt.Sprint(t.BronzeSeq),
			fmt.Sprint(t.WitnessSeq), span, fmt.Sprint(t.OutboxRows), fmt.Sprint(len(t.BodyLost))})
	}
	if err := cliutil.Table(io, []string{"TENANT", "NAME", "STATUS", "JOURNAL", "BRONZE", "WITNESS", "EVENTS", "OUTBOX", "BODY LOST"}, rows); err != nil {
		return err
	}
	for _, t := range res.Tenants {
		if t.Problem != "" {
			fmt.Fprintf(io.ErrOut, "oml: tenant %s (%s): %s\n", t.Tenant, t.Name, t.Problem)
		}
		for _, c := range t.BodyLost {
			fmt.Fprintf(io.ErrOut, "oml: tenant %s (%s): claim %s v%d is body_lost: it was held and its body was lost with the tail (held bodies never reach the lake); it cannot be promoted: demote or erase it and have its writer submit again\n", t.Tenant, t.Name, c.ArtifactID, c.Version)
		}
		if t.Status == recovery.StatusRestored {
			fmt.Fprintf(io.ErrOut, "restored tenant %s (%s): events %d..%d, %d outbox rows (%d reseated, %d pending), journalled at seq %d\n",
				t.Tenant, t.Name, t.FromSeq, t.ToSeq, t.OutboxRows, t.Reseated, t.Pending, t.RestoredSeq)
		}
	}
	if res.DryRun {
		fmt.Fprintln(io.ErrOut, "dry run: nothing was written")
	}
	return nil
}

package keycmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
)

// RevokeOptions are `oml key revoke`'s flags and what its run function
// needs, as functions (NewCmdRevoke fills them from the Factory; a test
// replaces them).
type RevokeOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Signer loads the current deployment key, which signs the event.
	Signer func() (*keys.Key, error)
	// Open opens the database.
	Open func(ctx context.Context) (*pgxpool.Pool, error)
	// Revoke is keyring.Revoke: it journals key.revoked.
	Revoke func(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, keyID, by, reason string) (keyring.RevokeResult, error)

	KeyID  string
	Reason string
	By     string
	Yes    bool
}

// NewCmdRevoke builds `oml key revoke`.
func NewCmdRevoke(f *cliutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{IO: f.IO, Format: f.Format, Signer: currentKey(f, "a revocation"), Open: f.CurrentDB, Revoke: keyring.Revoke}
	cmd := &cobra.Command{
		Use:   "revoke KEY_ID --reason R",
		Short: "Stop trusting a deployment key (key.revoked on the provider chain, naming every chain's head)",
		Long: `Journal key.revoked for KEY_ID on the provider chain, signed by another key
that is still valid (--signing-key / OML_SIGNING_KEY_FILE: rotate first). The
event records every chain's head at that moment.

Afterwards the journal refuses events signed by the revoked key, and
oml chain verify reports as revoked-key any event it signed above its chain's
recorded head (what a stolen key could back-fill); events it signed before
stay valid, so every chain still verifies end to end.

Revoke only once no writer signs with the key (oml key list shows when it last
signed): an event it signs after the heads are read is, correctly, a finding.
Asks for confirmation on a terminal; scripts pass --yes.
Exit status: 0 revoked; 1 refused (unknown key, already revoked, a key revoking
itself); 2 usage, configuration or connection error.`,
		Example: `  oml key revoke 5c2d0a... --reason "laptop with the old key lost" --yes`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.KeyID = args[0]
			if strings.TrimSpace(opts.Reason) == "" {
				return cliutil.FlagErrorf("--reason is required: say why the key is no longer trusted (it is journalled)")
			}
			var err error
			if opts.By, err = cliutil.JournalledBy(opts.By); err != nil {
				return err
			}
			if !opts.Yes && !opts.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("revoking is permanent and stdin is not a terminal to confirm on: pass --yes")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return revokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the key is revoked (required; journalled)")
	cmd.Flags().StringVar(&opts.By, "by", "", "who revokes it (journalled; default: the OS user)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func revokeRun(ctx context.Context, opts *RevokeOptions) error {
	format, _ := opts.Format()
	signer, err := opts.Signer()
	if err != nil {
		return err
	}
	pool, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	if !cliutil.Confirmed(opts.IO, opts.Yes, fmt.Sprintf("Revoke key %s for good, signed by %s? [y/N] ", opts.KeyID, signer.KeyID()), "Nothing revoked.") {
		return nil
	}
	res, err := opts.Revoke(ctx, pool, signer, opts.KeyID, opts.By, opts.Reason)
	if errors.Is(err, keyring.ErrRefused) {
		return cliutil.Findingsf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Revoked key %s at provider seq %d (signed by %s), recording the heads of %d chain(s).\n",
		res.KeyID, res.ProviderSeq, res.SignedBy, res.Chains)
	return err
}

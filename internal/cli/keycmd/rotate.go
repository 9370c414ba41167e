package keycmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
)

// RotateOptions are `oml key rotate`'s flags and what its run function
// needs, as functions (NewCmdRotate fills them from the Factory; a test
// replaces them).
type RotateOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Signer loads the current deployment key, which signs the event.
	Signer func() (*keys.Key, error)
	// Open opens the database.
	Open func(ctx context.Context) (*pgxpool.Pool, error)
	// LoadNew loads the key to issue (keys.LoadFile).
	LoadNew func(path string) (*keys.Key, error)
	// Rotate is keyring.Rotate: it journals key.issued for next.
	Rotate func(ctx context.Context, pool *pgxpool.Pool, current chain.Signer, next *keys.Key) (int64, error)

	New string
	Yes bool
}

// NewCmdRotate builds `oml key rotate`.
func NewCmdRotate(f *cliutil.Factory, runF func(context.Context, *RotateOptions) error) *cobra.Command {
	opts := &RotateOptions{IO: f.IO, Format: f.Format, Signer: currentKey(f, "a rotation"), Open: f.CurrentDB, LoadNew: keys.LoadFile, Rotate: keyring.Rotate}
	cmd := &cobra.Command{
		Use:   "rotate --new FILE",
		Short: "Issue a new deployment key on the provider chain (key.issued, signed by the current key)",
		Long: `Issue the key in FILE (made with oml key generate) as a deployment key: a
key.issued event on the provider chain, signed by the current key
(--signing-key / OML_SIGNING_KEY_FILE). Both keys are then valid.

Then move every writer to the new key: point OML_SIGNING_KEY_FILE at FILE, or
replace the file's contents (the lake writer reloads its key file by itself,
within a few seconds). When nothing signs with the old key any more
(oml key list shows when each key last signed), revoke it with oml key revoke.
See docs/chain-verify.md, "Key rotation and revocation".

Asks for confirmation on a terminal; scripts pass --yes.
Exit status: 0 issued; 1 refused by the journal; 2 usage, configuration or connection error.`,
		Example: `  oml key generate --out /etc/oml/deploy-2027.key
  oml key rotate --new /etc/oml/deploy-2027.key --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.New == "" {
				return cliutil.FlagErrorf("--new FILE is required: the key to issue (oml key generate --out FILE makes one)")
			}
			if !opts.Yes && !opts.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("stdin is not a terminal to confirm on: pass --yes")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return rotateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.New, "new", "", "the new key file to issue")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// currentKey is the Signer of rotate and revoke: what names the event in
// the error when no key is configured.
func currentKey(f *cliutil.Factory, what string) func() (*keys.Key, error) {
	return func() (*keys.Key, error) {
		return f.SigningKey(fmt.Sprintf("%s is signed by a valid deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE", what))
	}
}

func rotateRun(ctx context.Context, opts *RotateOptions) error {
	format, _ := opts.Format()
	cur, err := opts.Signer()
	if err != nil {
		return err
	}
	next, err := opts.LoadNew(opts.New)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	pool, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	if !cliutil.Confirmed(opts.IO, opts.Yes, fmt.Sprintf("Issue key %s, signed by %s? [y/N] ", next.KeyID(), cur.KeyID()), "Nothing issued.") {
		return nil
	}
	seq, err := opts.Rotate(ctx, pool, cur, next)
	if errors.Is(err, keyring.ErrRefused) {
		return cliutil.Findingsf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, map[string]any{"key_id": next.KeyID(), "provider_seq": seq, "signed_by": cur.KeyID()})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Issued key %s at provider seq %d (signed by %s).\nNext: point every writer at %s (the lake writer reloads its key file by itself), then oml key revoke %s --reason ...\n",
		next.KeyID(), seq, cur.KeyID(), opts.New, cur.KeyID())
	return err
}

package keycmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
)

// RotateOptions are `oml key rotate`'s flags.
type RotateOptions struct {
	F   *cliutil.Factory
	New string
	Yes bool
}

// NewCmdRotate builds `oml key rotate`.
func NewCmdRotate(f *cliutil.Factory, runF func(context.Context, *RotateOptions) error) *cobra.Command {
	opts := &RotateOptions{F: f}
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
			if !opts.Yes && !f.IO.IsStdinTTY() {
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

func currentKey(f *cliutil.Factory, what string) (*keys.Key, error) {
	return f.SigningKey(fmt.Sprintf("%s is signed by a valid deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE", what))
}

func rotateRun(ctx context.Context, opts *RotateOptions) error {
	f := opts.F
	format, _ := f.Format()
	cur, err := currentKey(f, "a rotation")
	if err != nil {
		return err
	}
	next, err := keys.LoadFile(opts.New)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes && !cliutil.Confirm(f, fmt.Sprintf("Issue key %s, signed by %s? [y/N] ", next.KeyID(), cur.KeyID())) {
		fmt.Fprintln(f.IO.ErrOut, "Nothing issued.")
		return nil
	}
	seq, err := keyring.Rotate(ctx, pool, cur, next)
	if errors.Is(err, keyring.ErrRefused) {
		return cliutil.Findingsf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, map[string]any{"key_id": next.KeyID(), "provider_seq": seq, "signed_by": cur.KeyID()})
	}
	_, err = fmt.Fprintf(f.IO.Out, "Issued key %s at provider seq %d (signed by %s).\nNext: point every writer at %s (the lake writer reloads its key file by itself), then oml key revoke %s --reason ...\n",
		next.KeyID(), seq, cur.KeyID(), opts.New, cur.KeyID())
	return err
}

// RevokeOptions are `oml key revoke`'s flags.
type RevokeOptions struct {
	F      *cliutil.Factory
	KeyID  string
	Reason string
	By     string
	Yes    bool
}

// NewCmdRevoke builds `oml key revoke`.
func NewCmdRevoke(f *cliutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{F: f}
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
			if opts.By == "" {
				opts.By = cliutil.OSUser()
			}
			if strings.TrimSpace(opts.By) == "" {
				return cliutil.FlagErrorf("cannot tell who you are: pass --by NAME (it is journalled)")
			}
			if !opts.Yes && !f.IO.IsStdinTTY() {
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
	f := opts.F
	format, _ := f.Format()
	signer, err := currentKey(f, "a revocation")
	if err != nil {
		return err
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes && !cliutil.Confirm(f, fmt.Sprintf("Revoke key %s for good, signed by %s? [y/N] ", opts.KeyID, signer.KeyID())) {
		fmt.Fprintln(f.IO.ErrOut, "Nothing revoked.")
		return nil
	}
	res, err := keyring.Revoke(ctx, pool, signer, opts.KeyID, opts.By, opts.Reason)
	if errors.Is(err, keyring.ErrRefused) {
		return cliutil.Findingsf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, res)
	}
	_, err = fmt.Fprintf(f.IO.Out, "Revoked key %s at provider seq %d (signed by %s), recording the heads of %d chain(s).\n",
		res.KeyID, res.ProviderSeq, res.SignedBy, res.Chains)
	return err
}

// ListOptions are `oml key list`'s dependencies.
type ListOptions struct {
	F *cliutil.Factory
}

// NewCmdList builds `oml key list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{F: f}
	return &cobra.Command{
		Use:   "list",
		Short: "Every deployment key the provider chain issued: role, issued, revoked, last used",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *ListOptions) error {
	f := opts.F
	format, _ := f.Format()
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return err
	}
	ks, err := keyring.List(ctx, pool)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, ks)
	}
	rows := make([][]string, 0, len(ks))
	for _, k := range ks {
		revoked, last := "-", "-"
		if k.RevokedSeq != nil && k.RevokedAt != nil {
			revoked = fmt.Sprintf("%s (provider seq %d)", cliutil.Time(*k.RevokedAt), *k.RevokedSeq)
		}
		if k.LastUsedAt != nil {
			last = cliutil.Time(*k.LastUsedAt)
		}
		rows = append(rows, []string{k.KeyID, k.Role, fmt.Sprintf("%s (provider seq %d)", cliutil.Time(k.IssuedAt), k.IssuedSeq), revoked, last})
	}
	return cliutil.Table(f.IO, []string{"KEY ID", "ROLE", "ISSUED", "REVOKED", "LAST SIGNED"}, rows)
}

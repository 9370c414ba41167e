package keycmd

import (
	"context"
	"encoding/base64"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/witness"
)

// ShowOptions are what `oml key show`'s run function needs, as functions
// (NewCmdShow fills them from the Factory; a test replaces them).
type ShowOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Key loads the key file (Factory.SigningKey); Path names it.
	Key  func() (*keys.Key, error)
	Path func() string
}

// NewCmdShow builds `oml key show`.
func NewCmdShow(f *cliutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{IO: f.IO, Format: f.Format, Key: func() (*keys.Key, error) { return f.SigningKey("") }, Path: f.SigningKeyPath}
	return &cobra.Command{
		Use:   "show",
		Short: "Print the key id and public key of the signing key file (never the private key)",
		Long: `Load the key file named by --signing-key / OML_SIGNING_KEY_FILE, check it
(mode 0600, PEM PKCS#8 ed25519) and print its key id and public key, so you
can tell which key a file holds and compare it with the key.issued events on
the provider chain.`,
		Example: `  oml key show --signing-key /etc/oml/deploy.key`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return showRun(opts)
		},
	}
}

func showRun(opts *ShowOptions) error {
	format, _ := opts.Format()
	k, err := opts.Key()
	if err != nil {
		return err
	}
	pub := base64.StdEncoding.EncodeToString(k.Public())
	vkey := witness.VerifierKey(k.KeyID(), k.Public())
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, map[string]string{
			"key_id": k.KeyID(), "algorithm": "ed25519", "public_key": pub, "note_verifier_key": vkey, "path": opts.Path(),
		})
	}
	return cliutil.KeyValues(opts.IO.Out, [][2]string{
		{"key_id", k.KeyID()}, {"algorithm", "ed25519"}, {"public_key", pub}, {"note_verifier_key", vkey}, {"path", opts.Path()},
	})
}

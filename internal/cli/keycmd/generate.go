package keycmd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
)

// GenerateOptions are `oml key generate`'s flags and what its run function
// needs, as functions (NewCmdGenerate fills them; a test replaces them).
type GenerateOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Generate makes the key (keys.Generate); Write writes it to a file
	// with mode 0600, refusing to replace one unless force (keys.WriteFile).
	Generate func() (*keys.Key, error)
	Write    func(path string, k *keys.Key, o keys.WriteOptions) error

	Out   string
	Force bool
}

// NewCmdGenerate builds `oml key generate`.
func NewCmdGenerate(f *cliutil.Factory, runF func(context.Context, *GenerateOptions) error) *cobra.Command {
	opts := &GenerateOptions{IO: f.IO, Format: f.Format, Generate: keys.Generate, Write: keys.WriteFile}
	cmd := &cobra.Command{
		Use:   "generate --out FILE",
		Short: "Write a new ed25519 deployment key to FILE (mode 0600)",
		Long: `Write a new random ed25519 key to FILE with mode 0600 and print its key id.

An existing FILE is never overwritten unless --force is given: replacing the
deployment key orphans the chains it signed (the new key is not issued until
a key.issued event registers it). The file is PEM PKCS#8, readable by
openssl (openssl pkey -in FILE -pubout).`,
		Example: `  oml key generate --out /etc/oml/deploy.key
  export OML_SIGNING_KEY_FILE=/etc/oml/deploy.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return cliutil.FlagErrorf("--out FILE is required: where to write the new key")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return generateRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "file to write the key to (required)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace FILE if it exists")
	return cmd
}

func generateRun(opts *GenerateOptions) error {
	format, _ := opts.Format()
	k, err := opts.Generate()
	if err != nil {
		return err
	}
	if err := opts.Write(opts.Out, k, keys.WriteOptions{Force: opts.Force}); err != nil {
		if errors.Is(err, keys.ErrExists) {
			return cliutil.FlagErrorf("%s already exists; refusing to overwrite a signing key (pass --force to replace it)", opts.Out)
		}
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, map[string]string{
			"key_id": k.KeyID(), "path": opts.Out, "algorithm": "ed25519",
			"public_key": base64.StdEncoding.EncodeToString(k.Public()),
		})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Wrote ed25519 key %s to %s (mode 0600).\n", k.KeyID(), opts.Out)
	return err
}

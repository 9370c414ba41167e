// Package initcmd is `oml init`: migrate, then deployment genesis (the
// provider chain's root key.issued for the deployment key).
package initcmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cli/migratecmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/tenant"
)

// Options are `oml init`'s dependencies.
type Options struct {
	F *cliutil.Factory
}

// NewCmd builds `oml init`.
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Migrate the schema and open the provider chain with the deployment key",
		Long: `Prepare a database for oml: apply the schema (as oml migrate does), then
perform deployment genesis: the reserved provider tenant's chain opens with
key.issued for the deployment key (--signing-key / OML_SIGNING_KEY_FILE),
signed by that key.

Running it again with the same key changes nothing and says so. Running it
with a different key is refused: a deployment has one root key.`,
		Example: `  oml key generate --out deploy.key
  oml init --signing-key deploy.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	f := opts.F
	format, _ := f.Format()
	// Load the key first: a missing key should fail before anything changes.
	k, err := f.SigningKey("")
	if err != nil {
		return err
	}
	applied, err := migratecmd.Apply(ctx, f)
	if err != nil {
		return err
	}
	pool, err := f.DB(ctx)
	if err != nil {
		return err
	}
	res, err := tenant.Init(ctx, pool, k)
	if errors.Is(err, tenant.ErrOtherKey) {
		return cliutil.ConfigErrorf("%s", err)
	}
	if err != nil {
		return cliutil.AsConfigError(fmt.Errorf("initialise the deployment: %w", err))
	}
	if format == cliutil.FormatJSON {
		names := make([]string, 0, len(applied))
		for _, m := range applied {
			names = append(names, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
		return cliutil.WriteJSON(f.IO.Out, map[string]any{
			"migrations_applied": names, "key_id": res.KeyID, "created": res.Created,
			"provider_seq": res.ProviderSeq, "issued_at": res.IssuedAt,
		})
	}
	for _, m := range applied {
		fmt.Fprintf(f.IO.Out, "Applied migration %03d_%s\n", m.Version, m.Name)
	}
	if !res.Created {
		_, err = fmt.Fprintf(f.IO.Out, "Already initialised with key %s; nothing to do.\n", res.KeyID)
		return err
	}
	_, err = fmt.Fprintf(f.IO.Out, "Initialised: the provider chain opened with key.issued for key %s (seq %d).\n", res.KeyID, res.ProviderSeq)
	return err
}

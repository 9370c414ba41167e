package tenantcmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/tenant"
)

// CreateOptions are `oml tenant create`'s arguments.
type CreateOptions struct {
	F    *cliutil.Factory
	Name string
}

// NewCmdCreate builds `oml tenant create NAME`.
func NewCmdCreate(f *cliutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{F: f}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant (idempotent: an existing name is reported, exit 0)",
		Long: `Create tenant NAME: tenant.created on the provider chain and tenant.genesis
on the new tenant's chain, in one transaction, signed with the deployment key
(--signing-key / OML_SIGNING_KEY_FILE).

NAME is 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter
or digit. If the tenant exists, it is reported and nothing changes (exit 0).`,
		Example: `  oml tenant create acme
  oml tenant create acme -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cliutil.FlagErrorf("oml tenant create takes exactly one NAME, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := tenant.ValidateName(opts.Name); err != nil {
				return cliutil.FlagErrorf("%s", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	f := opts.F
	format, _ := f.Format()
	k, err := f.SigningKey("")
	if err != nil {
		return err
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return err
	}
	t, created, err := tenant.Create(ctx, pool, k, opts.Name)
	if err != nil {
		if errors.Is(err, tenant.ErrNotInitialized) {
			return cliutil.ConfigErrorf("the deployment is not initialised: run `oml init` first")
		}
		return cliutil.AsConfigError(fmt.Errorf("create tenant %s: %w", opts.Name, err))
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, tenantJSON{Tenant: t, Created: created})
	}
	if !created {
		_, err = fmt.Fprintf(f.IO.Out, "Tenant %s already exists (id %s); nothing to do.\n", t.Name, t.ID)
		return err
	}
	_, err = fmt.Fprintf(f.IO.Out, "Created tenant %s (id %s): provider seq %d, genesis seq 1.\n", t.Name, t.ID, t.ProviderSeq)
	return err
}

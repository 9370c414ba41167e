package tenantcmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
)

// CreateOptions are `oml tenant create`'s argument and what its run
// function needs, as functions (NewCmdCreate fills them from the Factory;
// a test replaces them).
type CreateOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Key loads the deployment key; Open opens the database.
	Key  func() (*keys.Key, error)
	Open func(ctx context.Context) (*pgxpool.Pool, error)
	// Create is tenant.Create: created is false for an existing name.
	Create func(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, name string) (tenant.Tenant, bool, error)

	Name string
}

// NewCmdCreate builds `oml tenant create NAME`.
func NewCmdCreate(f *cliutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IO, Format: f.Format, Open: f.CurrentDB, Create: tenant.Create,
		Key: func() (*keys.Key, error) { return f.SigningKey("") }}
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
	format, _ := opts.Format()
	k, err := opts.Key()
	if err != nil {
		return err
	}
	pool, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	t, created, err := opts.Create(ctx, pool, k, opts.Name)
	if err != nil {
		if errors.Is(err, tenant.ErrNotInitialized) {
			return cliutil.ConfigErrorf("the deployment is not initialised: run `oml init` first")
		}
		return cliutil.AsConfigError(fmt.Errorf("create tenant %s: %w", opts.Name, err))
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, tenantJSON{Tenant: t, Created: created})
	}
	if !created {
		_, err = fmt.Fprintf(opts.IO.Out, "Tenant %s already exists (id %s); nothing to do.\n", t.Name, t.ID)
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Created tenant %s (id %s): provider seq %d, genesis seq 1.\n", t.Name, t.ID, t.ProviderSeq)
	return err
}

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
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
)

// Options are what `oml init`'s run function needs, as functions (NewCmd
// fills them from the Factory; a test replaces them).
type Options struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Key loads the deployment key.
	Key func() (*keys.Key, error)
	// Migrate applies the schema (migratecmd.Apply).
	Migrate func(ctx context.Context) ([]schema.Migration, error)
	// Genesis opens the provider chain with key.issued for k (tenant.Init;
	// initialise); its errors are the command's.
	Genesis func(ctx context.Context, k *keys.Key) (tenant.InitResult, error)
	// GrantMonitor lets the lake writer role read the standbys' positions
	// (schema.GrantMonitor on a connection of its own).
	GrantMonitor func(ctx context.Context) (schema.MonitorGrant, error)
}

// NewCmd builds `oml init`.
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Format: f.Format,
		Key:          func() (*keys.Key, error) { return f.SigningKey("") },
		Migrate:      func(ctx context.Context) ([]schema.Migration, error) { return migratecmd.Apply(ctx, f) },
		Genesis:      func(ctx context.Context, k *keys.Key) (tenant.InitResult, error) { return initialise(ctx, f, k) },
		GrantMonitor: func(ctx context.Context) (schema.MonitorGrant, error) { return grantMonitor(ctx, f) }}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Migrate the schema and open the provider chain with the deployment key",
		Long: `Prepare a database for oml: apply the schema (as oml migrate does), then
perform deployment genesis: the reserved provider tenant's chain opens with
key.issued for the deployment key (--signing-key / OML_SIGNING_KEY_FILE),
signed by that key.

Running it again with the same key changes nothing and says so. Running it
with a different key is refused: a deployment has one root key.

It also lets the lake writer role read the standbys' positions (their
flush_lsn in pg_stat_replication, which --durable-on needs): it grants
pg_monitor to oml_lakewriter when the connecting role may (a superuser, or a
role with ADMIN OPTION on pg_monitor), and otherwise prints the one statement
an administrator must run. A migration cannot do this: the grant is
cluster-wide and needs those privileges.`,
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

// grantMonitor is schema.GrantMonitor on a connection of its own.
func grantMonitor(ctx context.Context, f *cliutil.Factory) (schema.MonitorGrant, error) {
	conn, err := migratecmd.Connect(ctx, f)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	g, err := schema.GrantMonitor(ctx, conn)
	if err != nil {
		return "", cliutil.AsConfigError(err)
	}
	return g, nil
}

// initialise is Options.Genesis over the Factory's pool: another key is
// refused in one sentence (exit 2).
func initialise(ctx context.Context, f *cliutil.Factory, k *keys.Key) (tenant.InitResult, error) {
	pool, err := f.DB(ctx)
	if err != nil {
		return tenant.InitResult{}, err
	}
	res, err := tenant.Init(ctx, pool, k)
	if errors.Is(err, tenant.ErrOtherKey) {
		return res, cliutil.ConfigErrorf("%s", err)
	}
	if err != nil {
		return res, cliutil.AsConfigError(fmt.Errorf("initialise the deployment: %w", err))
	}
	return res, nil
}

func run(ctx context.Context, opts *Options) error {
	format, _ := opts.Format()
	// Load the key first: a missing key should fail before anything changes.
	k, err := opts.Key()
	if err != nil {
		return err
	}
	applied, err := opts.Migrate(ctx)
	if err != nil {
		return err
	}
	res, err := opts.Genesis(ctx, k)
	if err != nil {
		return err
	}
	monitor, err := opts.GrantMonitor(ctx)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		doc := map[string]any{
			"migrations_applied": migratecmd.Names(applied), "key_id": res.KeyID, "created": res.Created,
			"provider_seq": res.ProviderSeq, "issued_at": res.IssuedAt, "pg_monitor": monitor,
		}
		if monitor == schema.MonitorNeedsAdmin {
			doc["pg_monitor_statement"] = schema.MonitorGrantSQL
		}
		return cliutil.WriteJSON(opts.IO.Out, doc)
	}
	for _, m := range applied {
		fmt.Fprintf(opts.IO.Out, "Applied migration %03d_%s\n", m.Version, m.Name)
	}
	switch monitor {
	case schema.MonitorGranted:
		fmt.Fprintf(opts.IO.Out, "Granted pg_monitor to %s: the lake writer can read the standbys' positions.\n", schema.LakeWriterRole)
	case schema.MonitorNeedsAdmin:
		fmt.Fprintf(opts.IO.ErrOut, "oml: note: this role may not grant pg_monitor, so %s cannot read the standbys' positions (--durable-on needs them); an administrator must run: %s\n",
			schema.LakeWriterRole, schema.MonitorGrantSQL)
	}
	if !res.Created {
		_, err = fmt.Fprintf(opts.IO.Out, "Already initialised with key %s; nothing to do.\n", res.KeyID)
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Initialised: the provider chain opened with key.issued for key %s (seq %d).\n", res.KeyID, res.ProviderSeq)
	return err
}

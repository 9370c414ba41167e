// Package migratecmd is `oml migrate`: apply the embedded schema migrations
// (internal/schema), or show their status with --status.
package migratecmd

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/schema"
)

// Options are `oml migrate`'s flags and what its run function needs, as
// functions (NewCmd fills them from the Factory; a test replaces them).
type Options struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Apply migrates and returns what it applied (Apply).
	Apply func(ctx context.Context) ([]schema.Migration, error)
	// ReadStatus lists the migrations (schema.Status, on a connection of
	// its own): entries and an error together when the database holds one
	// this binary does not embed.
	ReadStatus func(ctx context.Context) ([]schema.StatusEntry, error)
	// Latest is the newest migration this binary embeds (schema.Latest).
	Latest func() int

	Status bool
}

// NewCmd builds `oml migrate`.
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Format: f.Format, Latest: schema.Latest,
		Apply:      func(ctx context.Context) ([]schema.Migration, error) { return Apply(ctx, f) },
		ReadStatus: func(ctx context.Context) ([]schema.StatusEntry, error) { return readStatus(ctx, f) }}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the oml schema to the database (idempotent, versioned, forward-only)",
		Long: `Apply every pending schema migration, in order, each in its own transaction.

Safe to run again (it does nothing when the schema is current) and safe to run
from several places at once (an advisory lock serialises runners). It refuses
to run when the database was migrated by a newer oml, or when a migration this
binary embeds differs from the one that was applied.

The connecting role becomes the owner of the oml schema. It also creates the
NOLOGIN job roles (if missing): oml_app for the application, oml_lakewriter
for the lake writer and oml_auditor for verify, reconcile and doctor; grant
each to its own login, e.g. GRANT oml_app TO my_service. A role that may not
create roles is told to ask a superuser. See docs/security.md.`,
		Example: `  oml migrate
  oml migrate --status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Status, "status", false, "list migrations and whether each is applied; change nothing")
	return cmd
}

// Connect opens one connection for migrating (ConfigError on failure).
func Connect(ctx context.Context, f *cliutil.Factory) (*pgx.Conn, error) {
	conn, err := pgconn.Connect(ctx, f.DatabaseURL(), pgconn.Options{ApplicationName: "oml-migrate"})
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	return conn, nil
}

// Apply migrates and reports the applied migrations (used by oml init too).
func Apply(ctx context.Context, f *cliutil.Factory) ([]schema.Migration, error) {
	conn, err := Connect(ctx, f)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err := schema.Apply(ctx, conn)
	if err != nil {
		return applied, cliutil.AsConfigError(fmt.Errorf("migrate: %w", err))
	}
	return applied, nil
}

// Names are the migrations as -o json lists them (migrate's "applied",
// init's "migrations_applied"): 001_init, never null.
func Names(ms []schema.Migration) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, fmt.Sprintf("%03d_%s", m.Version, m.Name))
	}
	return names
}

// readStatus is Options.ReadStatus over the Factory.
func readStatus(ctx context.Context, f *cliutil.Factory) ([]schema.StatusEntry, error) {
	conn, err := Connect(ctx, f)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return schema.Status(ctx, conn)
}

type migrationJSON struct {
	Version   int        `json:"version"`
	Name      string     `json:"name"`
	Checksum  string     `json:"checksum"`
	Applied   bool       `json:"applied"`
	AppliedAt *time.Time `json:"applied_at"`
}

func run(ctx context.Context, opts *Options) error {
	format, _ := opts.Format()
	if opts.Status {
		st, err := opts.ReadStatus(ctx)
		if err != nil && st == nil {
			return cliutil.AsConfigError(err)
		}
		out := make([]migrationJSON, 0, len(st))
		rows := make([][]string, 0, len(st))
		for _, e := range st {
			m := migrationJSON{Version: e.Version, Name: e.Name, Checksum: e.Checksum, Applied: e.Applied}
			state := "pending"
			if e.Applied {
				at := e.AppliedAt
				m.AppliedAt = &at
				state = cliutil.Time(at)
			}
			out = append(out, m)
			rows = append(rows, []string{fmt.Sprintf("%03d", e.Version), e.Name, state, e.Checksum[:12]})
		}
		if format == cliutil.FormatJSON {
			if werr := cliutil.WriteJSON(opts.IO.Out, map[string]any{"latest": opts.Latest(), "migrations": out}); werr != nil {
				return werr
			}
		} else if werr := cliutil.Table(opts.IO, []string{"VERSION", "NAME", "APPLIED", "CHECKSUM"}, rows); werr != nil {
			return werr
		}
		if err != nil {
			return cliutil.AsConfigError(err)
		}
		return nil
	}
	applied, err := opts.Apply(ctx)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, map[string]any{"applied": Names(applied), "version": opts.Latest()})
	}
	if len(applied) == 0 {
		_, err = fmt.Fprintf(opts.IO.Out, "Schema is current (version %d); nothing to apply.\n", opts.Latest())
		return err
	}
	for _, m := range applied {
		if _, err := fmt.Fprintf(opts.IO.Out, "Applied %03d_%s\n", m.Version, m.Name); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Schema is at version %d.\n", opts.Latest())
	return err
}

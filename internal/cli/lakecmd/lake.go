package lakecmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/tenant"
)

// NewCmd builds `oml lake` and its subcommands.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lake",
		Short: "Drain the outbox into the Delta lake and look at Delta tables",
		Long: `Commands for the Delta Lake side of oml.

TABLE arguments are either a full URL (file:///abs/path/to/table,
s3://bucket/prefix/to/table) or TENANT/LAYER/NAME (for example
acme/bronze/events or 3f9c.../bronze/events: TENANT is a tenant's name or
id, _provider for the provider), resolved under the lake root given by
--lake or OML_LAKE_URL; a name is looked up in the database (without one,
TENANT is the directory it spells). Tables are listed with
the tenant's name beside the id path. See docs/delta.md.`,
	}
	// One verb per file; each is added here, explicitly (no init()
	// registry), so the tree is read in one place.
	cmd.AddCommand(
		NewCmdInspect(f, nil), NewCmdHistory(f, nil),
		NewCmdDrain(f, nil), NewCmdStatus(f, nil), NewCmdRepair(f, nil),
		NewCmdCheckpoint(f, nil), NewCmdOptimize(f, nil), NewCmdVacuum(f, nil), NewCmdMaintain(f, nil),
		NewCmdErasureStatus(f, nil),
	)
	return cmd
}

// OpenTable resolves a TABLE argument to the table's store: a full URL,
// or TENANT/LAYER/NAME under the lake root. Failures are configuration
// errors (exit 2) with one sentence saying what to fix.
func OpenTable(ctx context.Context, f *cliutil.Factory, table string) (store.Store, error) {
	if strings.Contains(table, "://") {
		st, err := store.Open(ctx, table)
		if err != nil {
			return nil, cliutil.AsConfigError(err)
		}
		return st, nil
	}
	parts := strings.Split(strings.Trim(table, "/"), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, cliutil.FlagErrorf("TABLE %q is neither a URL (file:///..., s3://...) nor TENANT/LAYER/NAME", table)
	}
	// TENANT is a name or an id, as --tenant is everywhere; a name needs
	// the database to become the id the lake's paths use. Without a
	// database the part is taken as the directory it spells.
	if _, err := uuid.Parse(parts[0]); err != nil && f.DatabaseURL() != "" {
		id, err := resolveTenantName(ctx, f, parts[0], table)
		if err != nil {
			return nil, err
		}
		parts[0] = id.String()
	}
	root, err := f.Lake(ctx, fmt.Sprintf("TABLE %q is relative to the lake root, but no lake is configured: pass --lake or set OML_LAKE_URL, or give the table's full URL", table))
	if err != nil {
		return nil, err
	}
	st, err := store.Sub(root, strings.Join(parts, "/"))
	if err != nil {
		return nil, cliutil.FlagErrorf("TABLE %q: %v", table, err)
	}
	return st, nil
}

// resolveTenantName turns the TENANT part of a TABLE argument into its id.
func resolveTenantName(ctx context.Context, f *cliutil.Factory, name, table string) (uuid.UUID, error) {
	pool, err := f.DB(ctx)
	if err != nil {
		return uuid.UUID{}, err
	}
	t, err := tenant.Resolve(ctx, pool, name)
	if errors.Is(err, tenant.ErrUnknown) {
		return uuid.UUID{}, cliutil.FlagErrorf("TABLE %q: %v", table, err)
	}
	if err != nil {
		return uuid.UUID{}, cliutil.AsConfigError(err)
	}
	return t.ID, nil
}

// tenantNames maps tenant ids to names (the provider included), so tables
// listed by their id paths can show whose they are. Nil when no database
// is configured (the names are then shown as "-").
func tenantNames(ctx context.Context, f *cliutil.Factory) (map[uuid.UUID]string, error) {
	if f.DatabaseURL() == "" {
		return nil, nil
	}
	pool, err := f.DB(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := tenant.List(ctx, pool)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	names := map[uuid.UUID]string{tenant.Provider: tenant.ProviderName}
	for _, t := range ts {
		names[t.ID] = t.Name
	}
	return names, nil
}

// tenantOfPath is the name of the tenant whose id starts a table path
// ("3f9c.../silver/claims"), or "-".
func tenantOfPath(names map[uuid.UUID]string, path string) string {
	head, _, _ := strings.Cut(path, "/")
	if id, err := uuid.Parse(head); err == nil {
		if n, ok := names[id]; ok {
			return n
		}
	}
	return "-"
}

// tableError turns a Delta read error into a one-line error: a missing
// table is a usage/configuration problem (exit 2); a table oml refuses to
// read (a feature it does not support) is what the command found about
// the table, so exit 1.
func tableError(table string, err error) error {
	switch {
	case errors.Is(err, delta.ErrTableNotFound):
		return cliutil.ConfigErrorf("no Delta table at %s (no _delta_log/ commits found): check the TABLE argument and the lake root", table)
	case errors.Is(err, delta.ErrUnsupported):
		return cliutil.Findingsf("%v", err)
	}
	return fmt.Errorf("reading Delta table %s: %w", table, err)
}

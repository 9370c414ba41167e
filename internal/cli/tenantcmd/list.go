package tenantcmd

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/tenant"
)

// ListOptions are what `oml tenant list`'s run function needs, as
// functions (NewCmdList fills them from the Factory; a test replaces them).
type ListOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Tenants lists the customer tenants, by name (tenant.List); its
	// errors are the command's.
	Tenants func(ctx context.Context) ([]tenant.Tenant, error)
}

// NewCmdList builds `oml tenant list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IO, Format: f.Format, Tenants: cliutil.Query(f, func(ctx context.Context, pool *pgxpool.Pool) ([]tenant.Tenant, error) {
		return tenant.List(ctx, pool)
	})}
	return &cobra.Command{
		Use:     "list",
		Short:   "List tenants with their chain head seq",
		Example: `  oml tenant list -o json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *ListOptions) error {
	format, _ := opts.Format()
	ts, err := opts.Tenants(ctx)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		ts = cliutil.NonNil(ts)
		return cliutil.WriteJSON(opts.IO.Out, map[string]any{"tenants": ts})
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.ID.String(), t.Name, cliutil.Time(t.CreatedAt), strconv.FormatInt(t.HeadSeq, 10)})
	}
	return cliutil.Table(opts.IO, []string{"ID", "NAME", "CREATED", "HEAD_SEQ"}, rows)
}

package chaincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
)

// ExportOptions are `oml chain export`'s flags and what its run function
// needs, as functions (NewCmdExport fills them from the Factory; a test
// replaces them).
type ExportOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Open opens the database, resolves --tenant and fills what the bundle
	// carries besides the journal (the tenant's name, the lake's witnessed
	// heads, the key that signs the bundle when one is configured).
	Open func(ctx context.Context, tenant string, from int64) (*pgxpool.Pool, bundle.ExportOptions, error)
	// Export is bundle.Export: it writes the bundle to w.
	Export func(ctx context.Context, pool *pgxpool.Pool, w io.Writer, o bundle.ExportOptions) (bundle.Trailer, error)

	Tenant string
	From   int64
	Out    string
	Force  bool
}

// NewCmdExport builds `oml chain export`.
func NewCmdExport(f *cliutil.Factory, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IO, Format: f.Format, Export: bundle.Export,
		Open: func(ctx context.Context, tenant string, from int64) (*pgxpool.Pool, bundle.ExportOptions, error) {
			return openExport(ctx, f, tenant, from)
		}}
	cmd := &cobra.Command{
		Use:   "export --tenant T --out FILE",
		Short: "Write a self-contained proof of one tenant's chain for an auditor (checked offline by oml chain verify --bundle)",
		Long: `Write one tenant's chain as a bundle an auditor can check with no database
and no lake (oml chain verify --bundle FILE, or their own verifier: the format
is docs/chain-bundle.md).

The bundle holds, from one consistent snapshot of the journal: the whole
provider chain (it issues the keys and created the tenant), the tenant's
events from --from on (default: the genesis; with --from the event before it
is the anchor the segment is proven to extend), the tenant's signed heads
witnessed in the lake (with --lake), and, when the deployment key is at hand
(--signing-key), a head signed at export time for the last event.

The file is written to a temporary name beside FILE and renamed when complete;
an existing FILE is refused unless --force.
Exit status: 0 written; 2 usage, configuration or connection error.`,
		Example: `  oml chain export --tenant acme --out acme.bundle
  oml chain export --tenant acme --from 1200 --out acme-1200.bundle`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Tenant == "" {
				return cliutil.FlagErrorf("--tenant is required: a bundle proves one tenant's chain")
			}
			if opts.Out == "" {
				return cliutil.FlagErrorf("--out FILE is required")
			}
			if opts.From < 0 {
				return cliutil.FlagErrorf("--from must be a seq of 1 or more")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return exportRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Tenant, "tenant", "", "the tenant (name, id, or provider)")
	fl.Int64Var(&opts.From, "from", 0, "first event to include (default: the genesis)")
	fl.StringVar(&opts.Out, "out", "", "the bundle file to write")
	fl.BoolVar(&opts.Force, "force", false, "replace an existing --out file")
	return cmd
}

// openExport is ExportOptions.Open over the Factory.
func openExport(ctx context.Context, f *cliutil.Factory, name string, from int64) (*pgxpool.Pool, bundle.ExportOptions, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, bundle.ExportOptions{}, err
	}
	tenant, err := resolveTenant(ctx, pool, name)
	if err != nil {
		return nil, bundle.ExportOptions{}, err
	}
	eo := bundle.ExportOptions{Tenant: tenant, From: from}
	if names, err := tenantNames(ctx, pool); err == nil {
		eo.TenantName = names[tenant]
	}
	if eo.Lake, err = f.OptionalLake(ctx); err != nil {
		return nil, bundle.ExportOptions{}, err
	}
	if p := f.SigningKeyPath(); p != "" {
		k, err := keys.LoadFile(p)
		if err != nil {
			return nil, bundle.ExportOptions{}, cliutil.AsConfigError(err)
		}
		eo.Signer = k
	}
	return pool, eo, nil
}

func exportRun(ctx context.Context, opts *ExportOptions) error {
	format, _ := opts.Format()
	if !opts.Force {
		if _, err := os.Stat(opts.Out); err == nil {
			return cliutil.FlagErrorf("%s already exists: pass --force to replace it", opts.Out)
		}
	}
	pool, eo, err := opts.Open(ctx, opts.Tenant, opts.From)
	if err != nil {
		return err
	}
	tenant := eo.Tenant
	tmp, err := os.CreateTemp(filepath.Dir(opts.Out), "."+filepath.Base(opts.Out)+".*")
	if err != nil {
		return cliutil.ConfigErrorf("cannot write the bundle next to %s: %v", opts.Out, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	tr, err := opts.Export(ctx, pool, tmp, eo)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, bundle.ErrNoSuchEvent) {
		return cliutil.FlagErrorf("%v", err)
	}
	if err != nil {
		return cliutil.AsConfigError(fmt.Errorf("export the chain of %s: %w", opts.Tenant, err))
	}
	if err := os.Rename(tmp.Name(), opts.Out); err != nil {
		return cliutil.ConfigErrorf("cannot write %s: %v", opts.Out, err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, map[string]any{"file": opts.Out, "tenant_id": tenant, "provider_events": tr.ProviderEvents,
			"events": tr.Events, "to_seq": tr.ToSeq, "to_hash": tr.ToHash, "witnesses": tr.Witnesses})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Wrote %s: %d provider event(s), %d event(s) of %s through seq %d (%s), %d signed head(s).\nCheck it anywhere with: oml chain verify --bundle %s\n",
		opts.Out, tr.ProviderEvents, tr.Events, opts.Tenant, tr.ToSeq, short(tr.ToHash), tr.Witnesses, filepath.Base(opts.Out))
	return err
}

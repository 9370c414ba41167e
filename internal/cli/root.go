package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/buildinfo"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
)

// Main runs oml with the process's arguments and streams.
func Main() cliutil.ExitCode {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, iostreams.System(), os.Args[1:], os.Getenv)
}

// Run executes one oml invocation. It is Main without the process globals,
// so tests can drive the whole CLI.
func Run(ctx context.Context, io *iostreams.IOStreams, args []string, getenv func(string) string) cliutil.ExitCode {
	f := cliutil.New(io)
	f.Getenv = getenv
	defer f.Close()

	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)

	err := root.ExecuteContext(ctx)
	if err != nil {
		printError(io, root, err)
	}
	return cliutil.ExitCodeFor(err)
}

func printError(io *iostreams.IOStreams, root *cobra.Command, err error) {
	if errors.Is(err, cliutil.ErrSilent) {
		return
	}
	var fe *cliutil.FindingsError
	if errors.As(err, &fe) && fe.Msg == "" {
		return
	}
	msg := strings.TrimSpace(err.Error())
	fmt.Fprintf(io.ErrOut, "oml: %s\n", msg)
	var flagErr *cliutil.FlagError
	if errors.As(err, &flagErr) || strings.HasPrefix(msg, "unknown command") {
		fmt.Fprintln(io.ErrOut, "Run 'oml --help' (or 'oml COMMAND --help') for usage.")
	}
}

// NewRootCmd builds the whole command tree over f.
func NewRootCmd(f *cliutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "oml",
		Short: "Operate the oml memory store: signed journal, outbox and Delta lake",
		Long: `oml runs the storage side of the oml memory store.

PostgreSQL is the only commit point: each write appends an ed25519-signed event
to a per-tenant hash chain, updates the fold state and inserts an outbox row.
One lake writer (oml lake drain) drains the outbox into Delta Lake tables,
exactly once. The lake is derived and audit-only; the journal is the authority.

Configuration comes from flags or the environment (flags win):
  --database-url  OML_DATABASE_URL      PostgreSQL connection string
  --lake          OML_LAKE_URL          file:///abs/path or s3://bucket/prefix
  --signing-key   OML_SIGNING_KEY_FILE  deployment ed25519 key (journal writers only)

Exit codes: 0 all good; 1 the command ran and found a problem;
2 usage, configuration or connection error.`,
		Version:       buildinfo.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			_, err := f.Format()
			return err
		},
	}
	root.SetVersionTemplate("oml {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return cliutil.FlagErrorf("%s", err)
	})

	pf := root.PersistentFlags()
	pf.StringVar(&f.Flags.DatabaseURL, "database-url", "", "PostgreSQL connection string (env OML_DATABASE_URL)")
	pf.StringVar(&f.Flags.Lake, "lake", "", "lake root: file:///abs/path or s3://bucket/prefix (env OML_LAKE_URL)")
	pf.StringVar(&f.Flags.SigningKey, "signing-key", "", "deployment ed25519 key file (env OML_SIGNING_KEY_FILE)")
	pf.StringVarP(&f.Flags.Output, "output", "o", "", "output format: table or json")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(newVersionCmd(f))
	for _, c := range commands(f) {
		root.AddCommand(c)
	}
	return root
}

func newVersionCmd(f *cliutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the oml version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			format, _ := f.Format()
			if format == cliutil.FormatJSON {
				return cliutil.WriteJSON(f.IO.Out, map[string]string{"version": buildinfo.String()})
			}
			_, err := fmt.Fprintf(f.IO.Out, "oml %s\n", buildinfo.String())
			return err
		},
	}
}

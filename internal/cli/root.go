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
	rejectUnknownVerbs(root)
	explainArgs(root)
	registerCompletions(f, root)
	return root
}

// explainArgs turns cobra's bare argument-count errors ("accepts 1 arg(s),
// received 0") into one sentence naming the missing argument from the
// command's usage line: `oml deadletter show` says it needs ID.
func explainArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		explainArgs(sub)
	}
	orig := c.Args
	if orig == nil || !c.Runnable() || c.HasSubCommands() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := orig(cmd, args)
		if err == nil {
			return nil
		}
		var fe *cliutil.FlagError
		if errors.As(err, &fe) || strings.HasPrefix(err.Error(), "unknown command") {
			return err // already one sentence of our own, or cobra's typo error
		}
		names := argNames(cmd.Use)
		if len(args) == 0 && len(names) > 0 {
			return cliutil.FlagErrorf("%s needs %s (usage: %s)", cmd.CommandPath(), strings.Join(names, " "), cmd.UseLine())
		}
		return cliutil.FlagErrorf("%s: %v (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
	}
}

// argNames lists the positional argument placeholders of a Use line
// ("show ID" → ID, "reenqueue ID... | --all" → ID...).
func argNames(use string) []string {
	var out []string
	fields := strings.Fields(use)
	for i, w := range fields {
		if i == 0 || strings.HasPrefix(w, "-") || (i > 0 && strings.HasPrefix(fields[i-1], "--")) {
			continue // the verb, a flag, or a flag's value
		}
		bare := strings.Trim(w, "[]|")
		name := strings.TrimSuffix(bare, "...")
		if name != "" && strings.ToUpper(name) == name && strings.ToLower(name) != name {
			out = append(out, bare)
		}
	}
	return out
}

// rejectUnknownVerbs makes every noun group (a command with subcommands and
// no run of its own, such as `oml chain`) refuse an argument it does not
// know, as cobra already does for the root: `oml chain verfy` is a usage
// error (exit 2) with "Did you mean", never the noun's help and exit 0,
// which a cron job with a typo would take for success. With no argument a
// group still prints its help.
func rejectUnknownVerbs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownVerbs(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return unknownVerb(cmd, args[0])
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return cmd.Help()
	}
}

// unknownVerb is the usage error for `oml NOUN TYPO`, worded like cobra's
// own for an unknown top-level command so that printError adds the usage
// hint to both.
func unknownVerb(cmd *cobra.Command, verb string) error {
	msg := fmt.Sprintf("unknown command %q for %q", verb, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
	}
	if sugg := cmd.SuggestionsFor(verb); len(sugg) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(sugg, "\n\t")
	} else {
		var verbs []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				verbs = append(verbs, sub.Name())
			}
		}
		msg += fmt.Sprintf("; %s has: %s", cmd.CommandPath(), strings.Join(verbs, ", "))
	}
	return cliutil.FlagErrorf("%s", msg)
}

func newVersionCmd(f *cliutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the oml version, commit, Go version and build time",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			in := buildinfo.Read()
			format, _ := f.Format()
			if format == cliutil.FormatJSON {
				return cliutil.WriteJSON(f.IO.Out, in)
			}
			or := func(s string) string {
				if s == "" {
					return "unknown"
				}
				return s
			}
			commit := or(in.Commit)
			if in.Modified {
				commit += " (with uncommitted changes)"
			}
			if _, err := fmt.Fprintf(f.IO.Out, "oml %s\n", in.Version); err != nil {
				return err
			}
			return cliutil.KeyValues(f.IO.Out, [][2]string{
				{"module", strings.TrimSpace(in.Module + " " + in.ModVersion)},
				{"commit", commit},
				{"commit time", or(in.CommitTime)},
				{"build time", or(in.BuildTime)},
				{"go", in.GoVersion + " " + in.Platform},
			})
		},
	}
}

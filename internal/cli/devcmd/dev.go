package devcmd

import (
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
)

const defaultDatabase = "oml"

// Options are shared by every `oml dev` subcommand.
type Options struct {
	// Dir holds .oml/; default the current directory.
	Dir string
}

// NewCmd builds `oml dev` and its subcommands.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	opts := &Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a private local PostgreSQL for development and the demo",
		Long: `Developer commands.

oml dev up starts a private PostgreSQL from the system's server binaries with
its data under .oml/ in the current directory (installing Debian's postgresql
package first if no server binaries are found and oml runs as root). It
listens on a unix socket in .oml/run (TCP on 127.0.0.1 only with --port).
oml dev env prints the environment that points oml at it, and oml dev down
stops it (--purge also deletes its data and the default lake).

When oml runs as root the server runs as the postgres system user (or a
dedicated oml-postgres user), which must be able to enter every directory
above .oml/. See docs/dev-cluster.md.`,
		Example: `  oml dev up
  eval "$(oml dev env)"
  oml init
  oml dev down --purge`,
	}
	cmd.PersistentFlags().StringVar(&opts.Dir, "dir", ".", "directory holding .oml/")
	cmd.AddCommand(newUpCmd(f, opts), newDownCmd(f, opts), newEnvCmd(f, opts), NewCmdLoad(f, nil))
	return cmd
}

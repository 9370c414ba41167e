package devcmd

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/pgdev"
)

func newEnvCmd(f *cliutil.Factory, shared *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print the environment that points oml at the dev cluster",
		Long: `Print export lines for the running dev cluster, for eval in a POSIX shell:

  OML_DATABASE_URL  the database over the cluster's unix socket (no password:
                    trust authentication)
  OML_LAKE_URL      file://<abs>/.oml/lake, the default lake

With -o json the same values are printed as one JSON object. It fails (exit
code 2) when the cluster is not running.`,
		Example: `  eval "$(oml dev env)"
  oml dev env -o json | jq -r .database_url`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return envRun(&envOptions{IO: f.IO, Format: f.Format, Running: running, Options: shared})
		},
	}
}

// envOptions are what `oml dev env`'s run function needs, as functions
// (newEnvCmd fills them; a test replaces them).
type envOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Running reads the running dev cluster under dir: the URLs that point
	// at it; its errors are the command's.
	Running func(dir string) (envResult, error)

	*Options
}

type envResult struct {
	DatabaseURL    string `json:"database_url"`
	LakeURL        string `json:"lake_url"`
	TCPDatabaseURL string `json:"tcp_database_url,omitempty"`
}

// running is envOptions.Running over the cluster's files.
func running(dir string) (envResult, error) {
	l, err := newLayout(dir)
	if err != nil {
		return envResult{}, cliutil.AsConfigError(err)
	}
	st, pf, _ := pgdev.StatusOf(l.DataDir)
	if st != pgdev.Running {
		return envResult{}, cliutil.ConfigErrorf("no dev cluster is running in %s; start one with `oml dev up`", l.Root)
	}
	s, err := readState(l)
	if err != nil {
		return envResult{}, cliutil.AsConfigError(err)
	}
	res := envResult{
		DatabaseURL: pgdev.SocketURL(pf.SocketDir, pf.Port, pgdev.SuperUser, s.Database),
		LakeURL:     l.LakeURL(),
	}
	if pf.ListenAddr != "" {
		u := url.URL{Scheme: "postgres", User: url.User(pgdev.SuperUser), Host: net.JoinHostPort(pf.ListenAddr, strconv.Itoa(pf.Port)), Path: "/" + s.Database}
		res.TCPDatabaseURL = u.String()
	}
	return res, nil
}

func envRun(opts *envOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	res, err := opts.Running(opts.Dir)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "export %s=%s\nexport %s=%s\n",
		cliutil.EnvDatabaseURL, shellQuote(res.DatabaseURL),
		cliutil.EnvLakeURL, shellQuote(res.LakeURL))
	return err
}

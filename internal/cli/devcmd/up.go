package devcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/pgdev"
)

// upOptions are the inputs of `oml dev up`: its flags, and what its run
// function needs, as functions (newUpCmd fills them; a test replaces
// them).
type upOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Start starts (creating it on first use) the cluster under o.Dir and
	// creates o.Database: what it reports; notes such as a new cluster's
	// go to stderr. Its errors are the command's.
	Start func(ctx context.Context, o *upOptions) (upResult, error)

	*Options
	Port      int
	TCP       bool // --port was given
	Database  string
	NoInstall bool
}

func newUpCmd(f *cliutil.Factory, shared *Options) *cobra.Command {
	opts := &upOptions{IO: f.IO, Format: f.Format, Options: shared,
		Start: func(ctx context.Context, o *upOptions) (upResult, error) { return startCluster(ctx, f, o) }}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the private PostgreSQL under .oml/ (idempotent)",
		Long: `Start a private PostgreSQL cluster with its data in .oml/pgdata, creating it
on first use, and create the database (--database, default oml) if missing.

The server listens on a unix socket in .oml/run; --port N also listens on
127.0.0.1:N (--port 0 picks a free port). Local connections use trust
authentication, so the connection string carries no password. Running it
again while the cluster is up only reports it (and creates --database).

If no PostgreSQL server binaries are found, oml installs Debian's postgresql
package (apt-get, root only) unless --no-install is given.`,
		Example: `  oml dev up
  oml dev up --port 0 --database scratch
  eval "$(oml dev env)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.TCP = cmd.Flags().Changed("port")
			if opts.TCP && (opts.Port < 0 || opts.Port > 65535) {
				return cliutil.FlagErrorf("--port %d is not a TCP port: use 1-65535, or 0 for a free one", opts.Port)
			}
			if opts.Database == "" || len(opts.Database) > 63 {
				return cliutil.FlagErrorf("--database must be 1 to 63 bytes long")
			}
			return upRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Port, "port", 0, "also listen on 127.0.0.1:`N` (0 picks a free port)")
	cmd.Flags().StringVar(&opts.Database, "database", defaultDatabase, "database to create")
	cmd.Flags().BoolVar(&opts.NoInstall, "no-install", false, "never install PostgreSQL; fail if its binaries are missing")
	return cmd
}

// upResult is what `dev up -o json` prints (and the table view shows).
type upResult struct {
	Status      string `json:"status"` // started | already_running
	PID         int    `json:"pid"`
	Version     string `json:"version"`
	User        string `json:"server_user"`
	DataDir     string `json:"data_dir"`
	SocketDir   string `json:"socket_dir"`
	Port        int    `json:"port"`
	TCPAddr     string `json:"tcp_address,omitempty"`
	LogFile     string `json:"log_file"`
	Database    string `json:"database"`
	DatabaseURL string `json:"database_url"`
	LakeURL     string `json:"lake_url"`
}

func upRun(ctx context.Context, opts *upOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	res, err := opts.Start(ctx, opts)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	headline := "Started"
	if res.Status == "already_running" {
		headline = "Already running:"
	}
	fmt.Fprintf(opts.IO.Out, "%s PostgreSQL %s (pid %d, user %s)\n", headline, res.Version, res.PID, res.User)
	pairs := [][2]string{
		{"data", res.DataDir},
		{"socket", res.SocketDir},
	}
	if res.TCPAddr != "" {
		pairs = append(pairs, [2]string{"tcp", res.TCPAddr})
	}
	pairs = append(pairs,
		[2]string{"log", res.LogFile},
		[2]string{"database", res.Database},
		[2]string{"url", res.DatabaseURL},
		[2]string{"lake", res.LakeURL},
	)
	if err := cliutil.KeyValues(opts.IO.Out, pairs); err != nil {
		return err
	}
	hint := `Point oml at it with:  eval "$(oml dev env)"`
	if opts.Dir != "." {
		hint = fmt.Sprintf(`Point oml at it with:  eval "$(oml dev env --dir %s)"`, shellQuote(opts.Dir))
	}
	_, err = fmt.Fprintln(opts.IO.Out, hint)
	return err
}

// startCluster is upOptions.Start over the working directory's cluster.
func startCluster(ctx context.Context, f *cliutil.Factory, o *upOptions) (upResult, error) {
	l, err := newLayout(o.Dir)
	if err != nil {
		return upResult{}, cliutil.AsConfigError(err)
	}
	unlock, err := lockRoot(ctx, l, lockOptions{Create: true})
	if err != nil {
		return upResult{}, cliutil.AsConfigError(err)
	}
	defer unlock()
	c, err := openCluster(ctx, f, l, clusterOptions{TCP: o.TCP, Port: o.Port, Install: !o.NoInstall})
	if err != nil {
		return upResult{}, err
	}
	res := upResult{Status: "started"}

	st, pf, _ := c.Status()
	if st == pgdev.Running {
		res.Status = "already_running"
		if o.TCP && (pf.ListenAddr == "" || (o.Port != 0 && o.Port != pf.Port)) {
			return upResult{}, cliutil.ConfigErrorf("the dev cluster in %s is already running on %s; run `oml dev down` first to change --port", l.Root, describeListen(pf))
		}
	} else {
		created, err := c.Init(ctx)
		if err != nil {
			return upResult{}, cliutil.AsConfigError(err)
		}
		if created {
			fmt.Fprintf(f.IO.ErrOut, "Initialised a PostgreSQL %d cluster in %s\n", c.Binaries().Major, l.DataDir)
		}
		if err := c.Start(ctx); err != nil && !errors.Is(err, pgdev.ErrRunning) {
			return upResult{}, cliutil.AsConfigError(err)
		}
		if _, pf, err = c.Status(); err != nil || pf == nil {
			return upResult{}, cliutil.ConfigErrorf("PostgreSQL started but its postmaster.pid in %s is unreadable; see %s", l.DataDir, c.Config().LogFile)
		}
	}
	admin := pgdev.SocketURL(pf.SocketDir, pf.Port, pgdev.SuperUser, "postgres")
	if _, err := pgdev.EnsureDatabase(ctx, admin, o.Database); err != nil {
		return upResult{}, cliutil.AsConfigError(err)
	}
	if err := os.MkdirAll(l.LakeDir, 0o755); err != nil {
		return upResult{}, cliutil.ConfigErrorf("cannot create the lake directory %s: %v", l.LakeDir, err)
	}
	// dev env points at the database the last `dev up` asked for; the port
	// choice belongs to the start that made it.
	newState := state{Database: o.Database, Port: o.Port, TCP: o.TCP}
	if res.Status == "already_running" {
		old, _ := readState(l)
		newState.Port, newState.TCP = old.Port, old.TCP
	}
	if err := writeState(l, newState); err != nil {
		return upResult{}, cliutil.AsConfigError(err)
	}

	res.PID = pf.PID
	res.Version = c.Binaries().Version
	res.User = c.Runner().User
	res.DataDir = l.DataDir
	res.SocketDir = pf.SocketDir
	res.Port = pf.Port
	if pf.ListenAddr != "" {
		res.TCPAddr = pf.ListenAddr + ":" + strconv.Itoa(pf.Port)
	}
	res.LogFile = c.Config().LogFile
	res.Database = o.Database
	res.DatabaseURL = pgdev.SocketURL(pf.SocketDir, pf.Port, pgdev.SuperUser, o.Database)
	res.LakeURL = l.LakeURL()
	return res, nil
}

func describeListen(pf *pgdev.PIDFile) string {
	if pf.ListenAddr == "" {
		return "its unix socket only (no TCP)"
	}
	return pf.ListenAddr + ":" + strconv.Itoa(pf.Port)
}

// clusterOptions say how openCluster finds the server and listens.
type clusterOptions struct {
	TCP     bool // also listen on 127.0.0.1:Port (pgdev.Config.TCP)
	Port    int  // pgdev.Config.Port (0: the default socket name, or a free port with TCP)
	Install bool // install Debian's postgresql package when no server binaries are found
}

// openCluster finds binaries and the server user and returns a handle on
// the working directory's cluster (nothing is started).

func openCluster(ctx context.Context, f *cliutil.Factory, l layout, opts clusterOptions) (*pgdev.Cluster, error) {
	bin, err := pgdev.Ensure(ctx, pgdev.EnsureOptions{WantMajor: pgdev.ReadDataMajor(l.DataDir), Install: opts.Install, Log: f.IO.ErrOut})
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	runner, err := pgdev.RunnerFor(ctx, l.DataDir)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	c, err := pgdev.New(pgdev.Config{
		DataDir:   l.DataDir,
		SocketDir: l.SocketDir,
		TCP:       opts.TCP,
		Port:      opts.Port,
	}, bin, runner)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	return c, nil
}

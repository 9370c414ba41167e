package devcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/pgdev"
)

// downOptions are the inputs of `oml dev down`: its flag, and what its
// run function needs, as functions (newDownCmd fills them; a test
// replaces them).
type downOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Stop stops the cluster under o.Dir (and with o.Purge deletes what
	// dev up made): what it did. Its errors are the command's.
	Stop func(ctx context.Context, o *downOptions) (downResult, error)

	*Options
	Purge bool
}

func newDownCmd(f *cliutil.Factory, shared *Options) *cobra.Command {
	opts := &downOptions{IO: f.IO, Format: f.Format, Options: shared,
		Stop: func(ctx context.Context, o *downOptions) (downResult, error) { return stopCluster(ctx, f, o) }}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the private PostgreSQL (--purge also deletes its data)",
		Long: `Stop the dev cluster under .oml/ (fast shutdown: open transactions are rolled
back). Stopping a cluster that is not running is not an error.

--purge also deletes what oml dev up made: .oml/pgdata (every database in
it), the socket directory, the default lake .oml/lake (derived from the
database, so it must go with it) and .oml/dev.json. Other files under .oml/,
such as a signing key, are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return downRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Purge, "purge", false, "also delete the data directory, the default lake and the dev state")
	return cmd
}

type downResult struct {
	WasRunning bool     `json:"was_running"`
	Purged     []string `json:"purged"`
	// DataDir and Root are the cluster's data directory and .oml/, for
	// the table view.
	DataDir string `json:"-"`
	Root    string `json:"-"`
}

func downRun(ctx context.Context, opts *downOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	res, err := opts.Stop(ctx, opts)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	if res.WasRunning {
		fmt.Fprintf(opts.IO.Out, "Stopped the dev cluster in %s\n", res.DataDir)
	} else {
		fmt.Fprintf(opts.IO.Out, "The dev cluster in %s is not running\n", res.Root)
	}
	for _, p := range res.Purged {
		fmt.Fprintf(opts.IO.Out, "Deleted %s\n", p)
	}
	return nil
}

// stopCluster is downOptions.Stop over the working directory's cluster.
func stopCluster(ctx context.Context, f *cliutil.Factory, o *downOptions) (downResult, error) {
	l, err := newLayout(o.Dir)
	if err != nil {
		return downResult{}, cliutil.AsConfigError(err)
	}
	unlock, err := lockRoot(ctx, l, lockOptions{})
	if err != nil {
		return downResult{}, cliutil.AsConfigError(err)
	}
	defer unlock()
	res := downResult{Purged: []string{}, DataDir: l.DataDir, Root: l.Root}
	purge := []string{l.DataDir, l.SocketDir, l.LakeDir, l.StateFile}
	st, pf, _ := pgdev.StatusOf(l.DataDir)
	if pf != nil && pf.SocketDir != l.SocketDir && strings.HasPrefix(filepath.Base(pf.SocketDir), "oml-sock-") {
		// The server chose its short socket directory under another TMPDIR.
		purge = append(purge, pf.SocketDir)
	}
	if st != pgdev.Stopped {
		c, err := openCluster(ctx, f, l, clusterOptions{})
		if err != nil {
			return downResult{}, err
		}
		if res.WasRunning, err = c.Stop(ctx, pgdev.Fast); err != nil {
			return downResult{}, cliutil.AsConfigError(err)
		}
	}
	if o.Purge {
		for _, p := range purge {
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				return downResult{}, cliutil.ConfigErrorf("cannot delete %s: %v", p, err)
			}
			res.Purged = append(res.Purged, p)
		}
		// Remove .oml/ itself when nothing else is left in it (the lock
		// file goes while still held; a waiter then recreates what it needs).
		_ = os.Remove(filepath.Join(l.Root, lockFile))
		_ = os.Remove(filepath.Join(l.Root, "run"))
		_ = os.Remove(l.Root)
	}
	return res, nil
}

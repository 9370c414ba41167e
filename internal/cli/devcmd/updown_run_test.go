package devcmd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml dev up` and `oml dev down`'s run functions without a cluster: what
// they print (tty on and off, golden -o json), the dev env hint naming a
// --dir other than ".", and a cluster that cannot be started or stopped
// (exit 2, nothing printed).
func TestUpDownRuns_ReportAndExits(t *testing.T) {
	started := upResult{Status: "started", PID: 4242, Version: "15.8", User: "postgres", DataDir: "/work/.oml/pgdata", SocketDir: "/work/.oml/run",
		Port: 5432, LogFile: "/work/.oml/pgdata/log/postgresql.log", Database: "oml",
		DatabaseURL: "postgres://postgres@/oml?host=/work/.oml/run&port=5432", LakeURL: "file:///work/.oml/lake"}
	running := started
	running.Status, running.TCPAddr, running.Database = "already_running", "127.0.0.1:5432", "scratch"
	failed := cliutil.ConfigErrorf("no PostgreSQL server binaries found; install postgresql or drop --no-install")
	up := func(res upResult, dir string, err error) func(*runtest.Streams, bool) error {
		return func(s *runtest.Streams, json bool) error {
			return upRun(context.Background(), &upOptions{IO: s.IO, Format: runtest.Format(json), Options: &Options{Dir: dir}, Database: res.Database,
				Start: func(_ context.Context, o *upOptions) (upResult, error) {
					require.Equal(t, dir, o.Dir)
					return res, err
				}})
		}
	}
	stopped := downResult{WasRunning: true, Purged: []string{}, DataDir: "/work/.oml/pgdata", Root: "/work/.oml"}
	purged := downResult{Purged: []string{"/work/.oml/pgdata", "/work/.oml/lake", "/work/.oml/dev.json"}, DataDir: "/work/.oml/pgdata", Root: "/work/.oml"}
	down := func(res downResult, purge bool, err error) func(*runtest.Streams, bool) error {
		return func(s *runtest.Streams, json bool) error {
			return downRun(context.Background(), &downOptions{IO: s.IO, Format: runtest.Format(json), Options: &Options{Dir: "."}, Purge: purge,
				Stop: func(_ context.Context, o *downOptions) (downResult, error) {
					require.Equal(t, purge, o.Purge)
					return res, err
				}})
		}
	}
	for _, tc := range []struct {
		name      string
		run       func(*runtest.Streams, bool) error
		tty, json bool
		wantCode  cliutil.ExitCode
	}{
		{name: "up-tty", run: up(started, ".", nil), tty: true},
		{name: "up-no-tty", run: up(started, ".", nil)},
		{name: "up-json", run: up(started, ".", nil), json: true},
		{name: "up-running-dir", run: up(running, "/work/my dir", nil)},
		{name: "up-running-json", run: up(running, "/work/my dir", nil), json: true},
		{name: "up-fails", run: up(upResult{}, ".", failed), wantCode: cliutil.ExitUsage},
		{name: "down-tty", run: down(stopped, false, nil), tty: true},
		{name: "down-json", run: down(stopped, false, nil), json: true},
		{name: "down-purge-not-running", run: down(purged, true, nil)},
		{name: "down-purge-json", run: down(purged, true, nil), json: true},
		{name: "down-fails", run: down(downResult{}, false, cliutil.ConfigErrorf("pg_ctl stop: timed out")), wantCode: cliutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			runtest.RequireOutput(t, s, tc.run(&s, tc.json), tc.wantCode, "")
		})
	}
}

package lakecmd

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// fakeDrainer is a lake writer that returns what it is given.
type fakeDrainer struct {
	sum     lakewriter.Summary
	err     error
	ran     bool
	onceRan bool
}

func (d *fakeDrainer) Run(context.Context) error { d.ran = true; return d.err }
func (d *fakeDrainer) DrainOnce(context.Context) (lakewriter.Summary, error) {
	d.onceRan = true
	return d.sum, d.err
}
func (d *fakeDrainer) Frontier() int64 { return d.sum.EndFrontier }

// `oml lake drain`'s run function without a database or lake: the --once
// summary (tty on and off, golden -o json), what it says on stderr, and
// the exits — another writer holding the lease (0), held tables, refused
// tenants, dead letters with --fail-on-dead-letter, an interruption (1),
// a writer that cannot be opened (2) — and that without --once it runs
// until stopped and closes what it opened.
func TestDrainRun_SummaryStderrAndExits(t *testing.T) {
	sum := lakewriter.Summary{StartFrontier: 100, EndFrontier: 160, Target: 160, Batches: 3, Rows: 60, TableCommits: 7, Duration: 1500 * time.Millisecond,
		Replayed: &lakewriter.BatchResult{Start: 90, End: 100, Rows: 10, Tables: 1}}
	dead := sum
	dead.DeadLettered = []int64{121, 140}
	held := sum
	held.HeldTables = []lakewriter.TableHold{{Table: runtest.Acme.String() + "/silver/claims", Tenant: runtest.Acme, Kind: tables.Silver, Reason: "corrupt commit 7", Since: runtest.At}}
	refused := sum
	refused.Refused = []chainverify.Finding{{Tenant: runtest.Initech, Seq: 42, Reason: chainverify.ReasonHashMismatch, Detail: "stored hash differs", Evidence: map[string]string{"stored_hash": "ab", "expected_hash": "cd"}}}
	notLeader := &lakewriter.NotLeaderError{Holder: lakewriter.Lease{Holder: "writer-2", Host: "db2", PID: 7, AcquiredAt: runtest.At, HeartbeatAt: runtest.At, ExpiresAt: runtest.At}}
	for _, tc := range []struct {
		name         string
		tty, json    bool
		failOnDead   bool
		d            *fakeDrainer
		openErr      error
		wantCode     cliutil.ExitCode
		wantNotOnce  bool
		logLevelFlag string
	}{
		{name: "tty", tty: true, d: &fakeDrainer{sum: sum}},
		{name: "no-tty", d: &fakeDrainer{sum: sum}},
		{name: "json", json: true, d: &fakeDrainer{sum: sum}},
		{name: "dead-lettered", d: &fakeDrainer{sum: dead}},
		{name: "dead-lettered-fail", failOnDead: true, d: &fakeDrainer{sum: dead}, wantCode: cliutil.ExitFindings},
		{name: "dead-lettered-json", json: true, d: &fakeDrainer{sum: dead}},
		{name: "held", d: &fakeDrainer{sum: held}, wantCode: cliutil.ExitFindings},
		{name: "held-json", json: true, d: &fakeDrainer{sum: held}, wantCode: cliutil.ExitFindings},
		{name: "refused", d: &fakeDrainer{sum: refused}, wantCode: cliutil.ExitFindings},
		{name: "not-leader", d: &fakeDrainer{err: notLeader}},
		{name: "interrupted", d: &fakeDrainer{err: context.Canceled}, wantCode: cliutil.ExitFindings},
		{name: "open-error", openErr: cliutil.ConfigErrorf("no lake: pass --lake or set OML_LAKE_URL"), wantCode: cliutil.ExitUsage},
		{name: "bad-log-level", logLevelFlag: "loud", wantCode: cliutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			level := "error" // no log lines (they carry the time) in the golden files
			if tc.logLevelFlag != "" {
				level = tc.logLevelFlag
			}
			closed := false
			opts := &DrainOptions{IO: s.IO, Format: runtest.Format(tc.json), Once: true, FailOnDeadLetter: tc.failOnDead, LogLevel: level,
				Open: func(_ context.Context, o *DrainOptions, log *slog.Logger) (drainer, string, func(), error) {
					require.NotNil(t, log)
					if tc.openErr != nil {
						return nil, "", nil, tc.openErr
					}
					return tc.d, "file:///lake", func() { closed = true }, nil
				}}
			err := drainRun(context.Background(), opts)
			runtest.RequireStreams(t, s, err, tc.wantCode)
			if tc.d != nil {
				require.True(t, tc.d.onceRan, "--once drains once")
				require.True(t, closed, "what Open opened is closed")
			}
		})
	}
	// Without --once the writer runs until stopped, logging (text on a
	// terminal) that it started and stopped.
	s := runtest.IO(true)
	d := &fakeDrainer{sum: sum}
	err := drainRun(context.Background(), &DrainOptions{IO: s.IO, Format: runtest.Format(false), LogLevel: "info",
		Open: func(context.Context, *DrainOptions, *slog.Logger) (drainer, string, func(), error) {
			return d, "file:///lake", func() {}, nil
		}})
	require.NoError(t, err)
	require.True(t, d.ran)
	require.Empty(t, s.Out.String())
	require.Contains(t, s.ErrOut.String(), `msg="lake writer starting" lake=file:///lake`)
	require.Contains(t, s.ErrOut.String(), `msg="lake writer stopped cleanly" frontier=160`)
}

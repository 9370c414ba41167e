package outboxcmd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
)

// fixedPrune is what the fake engine returns: one table, fixed times.
func fixedPrune(dry bool) outbox.PruneResult {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	oldest := at.Add(-72 * time.Hour)
	return outbox.PruneResult{DryRun: dry, Frontier: 120, Cutoff: at, Rows: 40, Attempts: 3, Batches: 1, MaxBatch: 1234567 * time.Nanosecond,
		Tables: []outbox.TablePrune{{Tenant: uuid.MustParse("8b1e5d6a-35a4-4d0c-9a43-4f0f5bd0c6e1"), Target: "bronze.events", TxnVersion: 120,
			Through: 100, Rows: 40, Oldest: &oldest, StoppedBy: outbox.StopAge}}, KeptDead: 1}
}

// The run function of `oml outbox prune`, without a database: the engine
// is a fake recording what it was asked, so the test pins the command's
// own decisions — plan first unless --yes, ask only on a terminal, print
// the plan or the result as a table (aligned on a terminal, tab-separated
// off one) or as one JSON document.
func TestPruneRun_PlansAsksAndPrints(t *testing.T) {
	cases := []struct {
		name      string
		dryRun    bool
		yes       bool
		stdinTTY  bool
		stdoutTTY bool
		json      bool
		answer    string
		planRows  int64  // rows the plan finds (default 40)
		wantCalls []bool // DryRun of each engine call
		wantErr   string
		stderr    string
	}{
		{name: "dry-run", dryRun: true, wantCalls: []bool{true}},
		{name: "dry-run-tty", dryRun: true, stdoutTTY: true, stdinTTY: true, wantCalls: []bool{true}},
		{name: "dry-run-json", dryRun: true, json: true, wantCalls: []bool{true}},
		{name: "no-terminal-only-plans", wantCalls: []bool{true}, stderr: "Nothing deleted: stdin is not a terminal to confirm on; pass --yes to delete.\n"},
		{name: "nothing-to-delete-asks-nothing", stdinTTY: true, planRows: -1, wantCalls: []bool{true}},
		{name: "terminal-yes", stdinTTY: true, stdoutTTY: true, answer: "y\n", wantCalls: []bool{true, false}, stderr: "Delete these 40 outbox rows? [y/N] "},
		{name: "terminal-no", stdinTTY: true, stdoutTTY: true, answer: "n\n", wantCalls: []bool{true}, stderr: "Delete these 40 outbox rows? [y/N] Nothing deleted.\n"},
		{name: "yes", yes: true, wantCalls: []bool{false}},
		{name: "yes-json", yes: true, json: true, wantCalls: []bool{false}},
		{name: "yes-dry-run-plans", yes: true, dryRun: true, wantCalls: []bool{true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			io, in, out, errOut := iostreams.Test()
			io.SetStdinTTY(tc.stdinTTY)
			io.SetStdoutTTY(tc.stdoutTTY)
			in.WriteString(tc.answer)
			var calls []bool
			opts := &PruneOptions{
				IO: io,
				Format: func() (cliutil.Format, error) {
					if tc.json {
						return cliutil.FormatJSON, nil
					}
					return cliutil.FormatTable, nil
				},
				Open: func(context.Context) (*pgxpool.Pool, store.Store, error) { return nil, nil, nil },
				Prune: func(_ context.Context, o outboxprune.Options) (outbox.PruneResult, error) {
					require.Equal(t, 36*time.Hour, o.OlderThan)
					require.Equal(t, 500, o.BatchRows)
					calls = append(calls, o.DryRun)
					r := fixedPrune(o.DryRun)
					if tc.planRows < 0 {
						r.Rows, r.Tables = 0, []outbox.TablePrune{}
					}
					return r, nil
				},
				DryRun: tc.dryRun, Yes: tc.yes, BatchRows: 500, olderThan: 36 * time.Hour,
			}
			err := pruneRun(context.Background(), opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantCalls, calls)
			require.Equal(t, tc.stderr, errOut.String())
			golden.RequireEqual(t, out.Bytes())
		})
	}
}

// The engine's errors keep their exits: a continuity refusal is a finding
// (1), anything else configuration (2); an unopenable database or lake is
// returned as it is (the Factory already classified it).
func TestPruneRun_ErrorsKeepTheirExits(t *testing.T) {
	openErr := cliutil.ConfigErrorf("no lake")
	cases := []struct {
		name     string
		open     error
		prune    error
		wantCode cliutil.ExitCode
	}{
		{name: "refused", prune: &outboxprune.RefusedError{C: lakewriter.Continuity{State: lakewriter.ContinuityAhead, Detail: "x"}}, wantCode: cliutil.ExitFindings},
		{name: "lake", prune: &outboxprune.LakeError{Err: errors.New("unreadable")}, wantCode: cliutil.ExitUsage},
		{name: "other", prune: errors.New("connection reset"), wantCode: cliutil.ExitUsage},
		{name: "open", open: openErr, wantCode: cliutil.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			io, _, out, _ := iostreams.Test()
			called := false
			opts := &PruneOptions{
				IO:     io,
				Format: func() (cliutil.Format, error) { return cliutil.FormatTable, nil },
				Open:   func(context.Context) (*pgxpool.Pool, store.Store, error) { return nil, nil, tc.open },
				Prune: func(context.Context, outboxprune.Options) (outbox.PruneResult, error) {
					called = true
					return outbox.PruneResult{}, tc.prune
				},
				Yes: true,
			}
			err := pruneRun(context.Background(), opts)
			require.Error(t, err)
			require.Equal(t, tc.wantCode, cliutil.ExitCodeFor(err))
			require.Equal(t, tc.open == nil, called, "the engine runs only once the database and lake are open")
			require.Empty(t, out.String())
			if tc.open != nil {
				require.Same(t, openErr, err)
			}
		})
	}
}

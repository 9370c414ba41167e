package reconcilecmd

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// report is a fake reconcile: clean, or with findings (one truncated
// class) and an accepted gap.
func report(findings bool) *reconcile.Report {
	r := &reconcile.Report{OK: true, Frontier: 120, Counts: map[reconcile.Class]int64{}, Findings: []reconcile.Finding{}, Accepted: []reconcile.Finding{},
		Tenants: []reconcile.TenantSummary{{Tenant: runtest.Acme, Name: "acme", Tables: []reconcile.TableSummary{{}, {}, {}, {}}}},
		Stats:   reconcile.Stats{ElapsedSeconds: 1.25, LakeRows: 300, Events: 120, Claims: 40}}
	if findings {
		r.OK, r.Truncated = false, true
		r.Findings = []reconcile.Finding{
			{Class: reconcile.Classes[1], Tenant: runtest.Acme, TenantName: "acme", Table: "silver.claims", ArtifactID: "a-9", Version: 1, Seq: 77, Detail: "a lake row the journal does not explain"},
			{Class: reconcile.Classes[0], Tenant: runtest.Acme, TenantName: "acme", Table: "bronze.events", Seq: 12, OutboxSeq: 40, Detail: "no lake row"},
		}
		r.Counts[reconcile.Classes[0]], r.Counts[reconcile.Classes[1]] = 3, 1
		r.Accepted = []reconcile.Finding{{Class: reconcile.Classes[5], Tenant: runtest.Acme, TenantName: "acme", Workarea: "w-1", OutboxSeq: 41, Detail: "abandoned dead letter 5"}}
	}
	return r
}

// `oml reconcile`'s run function without a database or lake: the flags it
// hands the engine (--stale-after 0 is "never"), the summary and findings
// tables (tty on and off), golden -o json, and exit 1 on findings.
func TestRun_SummaryFindingsAndExits(t *testing.T) {
	cases := []struct {
		name      string
		tty, json bool
		findings  bool
		stale     time.Duration
		wantStale time.Duration
		wantCode  cliutil.ExitCode
	}{
		{name: "clean-tty", tty: true, stale: 5 * time.Minute, wantStale: 5 * time.Minute},
		{name: "clean-json", json: true, wantStale: -1},
		{name: "findings", findings: true, stale: time.Minute, wantStale: time.Minute, wantCode: cliutil.ExitFindings},
		{name: "findings-tty", tty: true, findings: true, wantStale: -1, wantCode: cliutil.ExitFindings},
		{name: "findings-json", json: true, findings: true, wantStale: -1, wantCode: cliutil.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			s.IO.SetStdoutTTY(tc.tty)
			opts := &Options{IO: s.IO, Format: runtest.Format(tc.json), Tenant: "acme", StaleAfter: tc.stale, SkipBodies: true, MaxFindings: 7,
				Open: func(_ context.Context, tenant string) (*pgxpool.Pool, store.Store, *uuid.UUID, error) {
					require.Equal(t, "acme", tenant)
					id := runtest.Acme
					return nil, nil, &id, nil
				},
				Reconcile: func(_ context.Context, _ *pgxpool.Pool, _ store.Store, o reconcile.Options) (*reconcile.Report, error) {
					require.Equal(t, runtest.Acme, *o.Tenant)
					require.Equal(t, []any{tc.wantStale, true, 7}, []any{o.StaleAfter, o.SkipBodies, o.MaxFindings})
					require.NotNil(t, o.Progress)
					return report(tc.findings), nil
				}}
			runtest.RequireOutput(t, s, run(context.Background(), opts), tc.wantCode, "")
		})
	}
}

// What Open refuses (an empty lake that was drained: a finding; no lake:
// configuration) is the command's error, and reconcile does not run.
func TestRun_OpenErrorsAreTheCommands(t *testing.T) {
	for _, want := range []error{cliutil.Findingsf("the lake holds nothing"), cliutil.ConfigErrorf("no lake configured")} {
		s := runtest.IO(false)
		err := run(context.Background(), &Options{IO: s.IO, Format: runtest.Format(false),
			Open: func(context.Context, string) (*pgxpool.Pool, store.Store, *uuid.UUID, error) {
				return nil, nil, nil, want
			}})
		require.Same(t, want, err)
		require.Empty(t, s.Out.String())
	}
}

package chaincmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/recovery"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/witness"
)

var at, acmeID, initID = runtest.At, runtest.Acme, runtest.Initech

const hashA = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"

// heads is a fake chain head view: acme witnessed (and, per case, forked,
// accepted or failed over), initech never witnessed.
func heads(kind string) *headsView {
	cp := int64(9)
	v := &headsView{lake: true, sysID: "7001", timeline: "1", fork: &chainverify.ForkCheckResult{Witnessed: map[uuid.UUID]*witness.Head{
		acmeID: {Tenant: acmeID, Seq: 10, Hash: hashA, Time: at, SystemIdentifier: "7001", Timeline: "1"}}},
		rows: []*headRow{
			{Tenant: acmeID, Name: "acme", Seq: 12, Hash: hashA, UpdatedAt: at, CheckpointSeq: &cp, CheckpointAt: &at},
			{Tenant: initID, Name: "initech", Seq: 3, Hash: hashA[:8], UpdatedAt: at},
		}}
	f := chainverify.Finding{Tenant: acmeID, Seq: 10, Reason: chainverify.ReasonFork, Detail: "PostgreSQL holds another hash at seq 10",
		Evidence: map[string]string{"anchor": "witness"}}
	switch kind {
	case "fork":
		v.fork.Findings = []chainverify.Finding{f}
	case "accepted":
		v.fork.Accepted = []chainverify.AcceptedFinding{{Finding: f, AcceptedAt: 44, Reason: "failover to db-2", By: "ops"}}
	case "failover":
		v.sysID, v.timeline = "7002", "2"
	case "no-lake":
		v.lake, v.fork = false, &chainverify.ForkCheckResult{}
	}
	return v
}

// `oml chain head`'s run function without a database: the status of each
// chain from the fork check, the failover and detail lines on stderr, the
// exit (1 for a fork), tty on and off and golden -o json.
func TestHeadRun_StatusesTablesAndJSON(t *testing.T) {
	cases := []struct {
		name      string
		kind      string
		tty, json bool
		wantCode  cliutil.ExitCode
		stderr    string
	}{
		{name: "ok-tty", tty: true},
		{name: "ok-no-tty"},
		{name: "ok-json", json: true},
		{name: "fork", kind: "fork", wantCode: cliutil.ExitFindings,
			stderr: "oml: tenant 0b5c9a52-4f5e-4c0e-8a55-1b2f3c4d5e6f (acme): fork: PostgreSQL holds another hash at seq 10 (PostgreSQL head: seq 12 hash " + hashA + "; witnessed 2026-01-02T03:04:05Z, system 7001, timeline 1)\n"},
		{name: "fork-json", kind: "fork", json: true, wantCode: cliutil.ExitFindings},
		{name: "accepted", kind: "accepted",
			stderr: "oml: tenant 0b5c9a52-4f5e-4c0e-8a55-1b2f3c4d5e6f (acme): accepted: fork at seq 10 (witness), accepted by provider seq 44: failover to db-2\n"},
		{name: "failover", kind: "failover",
			stderr: "oml: tenant 0b5c9a52-4f5e-4c0e-8a55-1b2f3c4d5e6f (acme): the database changed since this head was witnessed (system 7001 timeline 1, now system 7002 timeline 2): a failover or restore happened\n"},
		{name: "no-lake", kind: "no-lake", stderr: "oml: note: no lake configured (--lake or OML_LAKE_URL): witnessed heads not shown\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &HeadOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenant: "acme",
				Heads: func(_ context.Context, tenant string) (*headsView, error) {
					require.Equal(t, "acme", tenant)
					return heads(tc.kind), nil
				}}
			runtest.RequireOutput(t, s, headRun(context.Background(), opts), tc.wantCode, tc.stderr)
		})
	}
}

func openRecoveryFake(t *testing.T, wantDryRun bool) openRecovery {
	return func(_ context.Context, dryRun bool) (*keys.Key, *pgxpool.Pool, store.Store, error) {
		require.Equal(t, wantDryRun, dryRun)
		return nil, nil, nil, nil
	}
}

// restorePlan is the fake engine's answer: acme restorable (restored when
// not a dry run), initech refused or intact.
func restorePlan(o recovery.RestoreOptions, refuse bool) *recovery.RestoreResult {
	acme := &recovery.TenantResult{Tenant: acmeID, Name: "acme", Status: recovery.StatusRestorable, JournalSeq: 10, BronzeSeq: 14, WitnessSeq: 14,
		FromSeq: 11, ToSeq: 14, Events: 4, OutboxRows: 8, BodyLost: []journal.ClaimRef{{ArtifactID: "a-1", Version: 2}}}
	if !o.DryRun {
		acme.Status, acme.Reseated, acme.Pending, acme.RestoredSeq = recovery.StatusRestored, 1, 2, 15
	}
	other := &recovery.TenantResult{Tenant: initID, Name: "initech", Status: recovery.StatusIntact, JournalSeq: 3, BronzeSeq: 3}
	if refuse {
		other.Status, other.Problem = recovery.StatusRefused, "the database wrote over the lost tail: a fork (see oml chain accept-fork)"
	}
	return &recovery.RestoreResult{Tenants: []*recovery.TenantResult{acme, other}, OutboxSeq: 90, DryRun: o.DryRun}
}

// `oml chain restore-tail`: plan first, ask on a terminal (refuse without
// one unless --yes), restore, print the table and the notes on stderr,
// exit 1 when a chain was refused.
func TestRestoreTailRun_PlansAsksAndPrints(t *testing.T) {
	cases := []struct {
		name      string
		tty, json bool
		dryRun    bool
		yes       bool
		answer    string
		refuse    bool
		wantCalls []bool // DryRun of each engine call
		wantCode  cliutil.ExitCode
	}{
		{name: "dry-run", dryRun: true, wantCalls: []bool{true}},
		{name: "dry-run-json", dryRun: true, json: true, wantCalls: []bool{true}},
		{name: "yes", yes: true, wantCalls: []bool{true, false}},
		{name: "yes-json", yes: true, json: true, wantCalls: []bool{true, false}},
		{name: "tty-yes", tty: true, answer: "y\n", wantCalls: []bool{true, false}},
		{name: "tty-no", tty: true, answer: "n\n", wantCalls: []bool{true}, wantCode: cliutil.ExitFindings},
		{name: "no-tty-refuses", wantCalls: []bool{true}, wantCode: cliutil.ExitUsage},
		{name: "refused", yes: true, refuse: true, wantCalls: []bool{true, false}, wantCode: cliutil.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			s.In.WriteString(tc.answer)
			var calls []bool
			opts := &RestoreTailOptions{IO: s.IO, Format: runtest.Format(tc.json), Open: openRecoveryFake(t, tc.dryRun),
				OnlyTenant: func(_ context.Context, _ *pgxpool.Pool, tenant string) (*uuid.UUID, error) {
					require.Empty(t, tenant)
					return nil, nil
				},
				Restore: func(_ context.Context, o recovery.RestoreOptions) (*recovery.RestoreResult, error) {
					require.Equal(t, "ops", o.By)
					calls = append(calls, o.DryRun)
					return restorePlan(o, tc.refuse), nil
				},
				DryRun: tc.dryRun, Yes: tc.yes, By: "ops"}
			err := restoreTailRun(context.Background(), opts)
			require.Equal(t, tc.wantCalls, calls)
			if tc.name == "tty-no" {
				require.ErrorIs(t, err, cliutil.ErrSilent)
			}
			runtest.RequireStreams(t, s, err, tc.wantCode) // stderr holds the plan
		})
	}
}

// `oml chain accept-fork`: plan, print the lost heads, ask, journal; an
// already accepted fork journals nothing; nothing to accept is exit 2.
func TestAcceptForkRun_PlansAsksAndPrints(t *testing.T) {
	cases := []struct {
		name      string
		tty, json bool
		yes       bool
		answer    string
		already   bool
		planErr   error
		wantCalls []bool
		wantCode  cliutil.ExitCode
	}{
		{name: "yes", yes: true, wantCalls: []bool{true, false}},
		{name: "yes-json", yes: true, json: true, wantCalls: []bool{true, false}},
		{name: "tty-no", tty: true, answer: "no\n", wantCalls: []bool{true}, wantCode: cliutil.ExitFindings},
		{name: "already", already: true, wantCalls: []bool{true}},
		{name: "nothing", planErr: recovery.ErrNothingToAccept, wantCalls: []bool{true}, wantCode: cliutil.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			s.In.WriteString(tc.answer)
			var calls []bool
			opts := &AcceptForkOptions{IO: s.IO, Format: runtest.Format(tc.json), Open: openRecoveryFake(t, false),
				ResolveTenant: func(context.Context, *pgxpool.Pool, string) (uuid.UUID, error) { return acmeID, nil },
				Accept: func(_ context.Context, o recovery.AcceptOptions) (*recovery.AcceptResult, error) {
					require.Equal(t, acmeID, o.Tenant)
					calls = append(calls, o.DryRun)
					if tc.planErr != nil {
						return nil, tc.planErr
					}
					r := &recovery.AcceptResult{Tenant: acmeID, Lost: []journal.LostHead{{Source: "witness", Seq: 14, Hash: hashA}}, SharedSeq: 10,
						NewSeq: 12, NewHash: hashA, DryRun: o.DryRun, Reason: o.Reason, By: o.By, AlreadyAccepted: tc.already}
					if !o.DryRun {
						r.ProviderSeq = 44
					}
					return r, nil
				},
				Tenant: "acme", Reason: "failover to db-2", Yes: tc.yes, By: "ops"}
			err := acceptForkRun(context.Background(), opts)
			require.Equal(t, tc.wantCalls, calls)
			runtest.RequireStreams(t, s, err, tc.wantCode)
		})
	}
}

// verified is a fake verification: acme clean, initech broken at seq 3,
// an accepted fork and a witness problem per case.
func verified(kind string) *dbVerify {
	v := &dbVerify{names: map[uuid.UUID]string{acmeID: "acme", initID: "initech"},
		wj: witnessCheckJSON{Checked: true, Tenants: 2, Bronze: 2, Problems: []string{}},
		rep: chainverify.Report{Events: 15, Rule: "batch", Elapsed: 250 * time.Millisecond, Checkpoints: 2, Chains: []chainverify.ChainReport{
			{Tenant: acmeID, Seq: 12, Hash: hashA, Events: 12, OK: true},
			{Tenant: initID, Seq: 3, Hash: hashA[:8], Events: 3, OK: true},
		}}}
	switch kind {
	case "broken":
		v.rep.Chains[1].OK, v.rep.Chains[1].Reason = false, chainverify.ReasonFork
		v.rep.Findings = []chainverify.Finding{{Tenant: initID, Seq: 3, Reason: chainverify.ReasonFork, Detail: "PostgreSQL holds another hash at seq 3"}}
		v.wj.Problems = []string{"witness _oml_witness/x/3.json: bad signature"}
	case "accepted":
		v.acceptedForks = []chainverify.AcceptedFinding{{Finding: chainverify.Finding{Tenant: initID, Seq: 3, Reason: chainverify.ReasonTailLost,
			Evidence: map[string]string{"anchor": "bronze"}}, AcceptedAt: 44, Reason: "failover", By: "ops"}}
	case "no-lake":
		v.wj = witnessCheckJSON{Problems: []string{}}
	case "resumed":
		v.rep.Resumed = 2
	}
	return v
}

// kindCase is a run test's case that picks a fake by kind.
type kindCase struct {
	name, kind string
	tty, json  bool
	wantCode   cliutil.ExitCode
}

// `oml chain verify`'s run function without a database: the chain and
// finding tables, the notes on stderr, the exit (1 on a finding) and
// golden -o json.
func TestVerifyRun_ReportsAndExits(t *testing.T) {
	cases := []kindCase{
		{name: "ok-no-tty"},
		{name: "ok-json", json: true},
		{name: "broken", kind: "broken", wantCode: cliutil.ExitFindings},
		{name: "broken-json", kind: "broken", json: true, wantCode: cliutil.ExitFindings},
		{name: "accepted", kind: "accepted"},
		{name: "no-lake", kind: "no-lake"},
		{name: "resumed", kind: "resumed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			s.IO.SetStdoutTTY(tc.tty)
			opts := &VerifyOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenant: "acme",
				Verify: func(_ context.Context, o *VerifyOptions, p verifyProgress) (*dbVerify, error) {
					require.Equal(t, "acme", o.Tenant)
					require.Nil(t, p.onPlan, "no progress bar off a terminal")
					p.start()()
					return verified(tc.kind), nil
				}}
			runtest.RequireStreams(t, s, verifyRun(context.Background(), opts), tc.wantCode)
		})
	}
}

// On a terminal the progress bar is started just before the journal is
// read and erased before the report is printed.
func TestVerifyRun_ProgressOnATerminal(t *testing.T) {
	s := runtest.IO(true)
	opts := &VerifyOptions{IO: s.IO, Format: runtest.Format(true),
		Verify: func(_ context.Context, _ *VerifyOptions, p verifyProgress) (*dbVerify, error) {
			require.NotNil(t, p.onPlan)
			p.onPlan(15)
			p.progress.Events.Store(15)
			p.start()()
			return verified(""), nil
		}}
	require.NoError(t, verifyRun(context.Background(), opts))
	require.Contains(t, s.Out.String(), `"ok": true`)
}

// witnessRoundFake publishes acme's head, finds initech's already
// witnessed or (conflict) refused as not extending an earlier witness.
func witnessRoundFake(kind string) *witnessRound {
	r := &witnessRound{names: map[uuid.UUID]string{acmeID: "acme", initID: "initech"}, heads: []*witness.Head{
		{Tenant: acmeID, Seq: 12, Hash: hashA, Time: at}, {Tenant: initID, Seq: 3, Hash: hashA, Time: at}}}
	if kind == "lagging" {
		r.notDurable = "standby db-2 has not flushed 0/3000060 within 1m0s"
		return r
	}
	r.sign = func(*witness.Head) error { return nil }
	r.publish = func(_ context.Context, h *witness.Head) (bool, error) {
		if h.Tenant != initID {
			return true, nil
		}
		if kind == "conflict" {
			return false, fmt.Errorf("%w: seq 3 is below the witnessed seq 5", witness.ErrNotExtending)
		}
		if kind == "superseded" {
			return false, fmt.Errorf("%w: tenant initech is witnessed at seq 5, past the head to publish (seq 3), and its journal holds that event", witness.ErrSuperseded)
		}
		return false, nil
	}
	r.checkpoint = func(context.Context, *witness.Head) error { return nil }
	return r
}

// `oml chain witness`: the state of each head, nothing witnessed (exit 0)
// while a standby lags, exit 1 for a head that does not extend a witness,
// exit 0 for a head the lake writer witnessed past after it was read.
func TestWitnessRun_StatesAndExits(t *testing.T) {
	cases := []kindCase{
		{name: "tty", tty: true},
		{name: "json", json: true},
		{name: "conflict", kind: "conflict", wantCode: cliutil.ExitFindings},
		{name: "superseded", kind: "superseded", tty: true},
		{name: "superseded-json", kind: "superseded", json: true},
		{name: "lagging", kind: "lagging"},
		{name: "lagging-json", kind: "lagging", json: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &WitnessOptions{IO: s.IO, Format: runtest.Format(tc.json),
				Prepare: func(context.Context, *WitnessOptions) (*witnessRound, error) { return witnessRoundFake(tc.kind), nil }}
			runtest.RequireStreams(t, s, witnessRun(context.Background(), opts), tc.wantCode)
		})
	}
}

// `oml chain export`: the bundle lands at --out only when complete, an
// existing file needs --force, an unknown event is a usage error.
func TestExportRun_WritesTheBundle(t *testing.T) {
	cases := []struct {
		name      string
		json      bool
		exists    bool
		force     bool
		exportErr error
		wantCode  cliutil.ExitCode
	}{
		{name: "table"},
		{name: "json", json: true},
		{name: "exists", exists: true, wantCode: cliutil.ExitUsage},
		{name: "force", exists: true, force: true},
		{name: "no-such-event", exportErr: bundle.ErrNoSuchEvent, wantCode: cliutil.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "acme.bundle")
			if tc.exists {
				require.NoError(t, os.WriteFile(out, []byte("old"), 0o600))
			}
			s := runtest.IO(false)
			opts := &ExportOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenant: "acme", From: 4, Out: out, Force: tc.force,
				Open: func(_ context.Context, tenant string, from int64) (*pgxpool.Pool, bundle.ExportOptions, error) {
					require.Equal(t, "acme", tenant)
					return nil, bundle.ExportOptions{Tenant: acmeID, TenantName: "acme", From: from}, nil
				},
				Export: func(_ context.Context, _ *pgxpool.Pool, w io.Writer, o bundle.ExportOptions) (bundle.Trailer, error) {
					require.Equal(t, int64(4), o.From)
					if _, err := w.Write([]byte("new")); err != nil {
						return bundle.Trailer{}, err
					}
					return bundle.Trailer{ProviderEvents: 3, Events: 8, Witnesses: 1, ToSeq: 12, ToHash: hashA}, tc.exportErr
				}}
			err := exportRun(context.Background(), opts)
			b := bytes.ReplaceAll(s.Out.Bytes(), []byte(dir), []byte("DIR")) // the golden file does not name the test's directory
			s.Out.Reset()
			s.Out.Write(b)
			runtest.RequireOutput(t, s, err, tc.wantCode, "")
			got, rerr := os.ReadFile(out)
			switch {
			case err == nil:
				require.Equal(t, "new", string(got))
			case tc.exists:
				require.Equal(t, "old", string(got), "a failed export leaves the file as it was")
			default:
				require.ErrorIs(t, rerr, os.ErrNotExist)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".acme.bundle.*"))
			require.Empty(t, left, "no temporary file is left behind")
		})
	}
}

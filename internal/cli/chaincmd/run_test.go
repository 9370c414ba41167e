package chaincmd

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

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

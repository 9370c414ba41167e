package deadlettercmd

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

var at, acmeID = runtest.At, runtest.Acme

// letters are what the fake database holds: one open dead letter, one
// re-enqueued, one abandoned.
func letters() []deadletter.Letter {
	open := deadletter.Letter{ID: 3, TenantID: acmeID, TenantName: "acme", OutboxSeq: 41, JournalSeq: 12, Target: "silver.claims", Op: "materialize",
		ArtifactID: runtest.Ptr("a-1"), Version: runtest.Ptr(int32(2)), Payload: json.RawMessage(`{"artifact_id": "a-1", "version": 2}`), Attempts: 5,
		FirstFailedAt: at, LastFailedAt: at.Add(time.Minute), SkippedSeq: 13,
		Error: "held body missing:\n the claim_bodies row for a-1 v2 is gone, so the lake writer cannot materialize it and gave up after five attempts"}
	re := open
	re.ID, re.OutboxSeq, re.Reenqueued, re.ReenqueuedAt, re.ReenqueuedSeq, re.NewOutboxSeq, re.ReenqueuedBy, re.ReenqueueReason =
		4, 42, true, runtest.Ptr(at.Add(time.Hour)), runtest.Ptr(int64(14)), runtest.Ptr(int64(50)), runtest.Ptr("ops"), runtest.Ptr("restored the body")
	ab := open
	ab.ID, ab.OutboxSeq, ab.TenantName, ab.Abandoned, ab.AbandonedAt, ab.AbandonedSeq, ab.AbandonedBy, ab.AbandonReason =
		5, 43, "", true, runtest.Ptr(at.Add(2*time.Hour)), runtest.Ptr(int64(15)), runtest.Ptr("ops"), runtest.Ptr("gone for good")
	return []deadletter.Letter{open, re, ab}
}

// `oml deadletter list`'s run function without a database: the --tenant,
// --all and --since it passes on, and its output pinned byte for byte —
// aligned (errors shortened) on a terminal, tab-separated off one, one
// JSON document with -o json, a sentence when there is nothing.
func TestListRun_TableOnAndOffATerminalAndJSON(t *testing.T) {
	cases := []struct {
		name   string
		tty    bool
		json   bool
		all    bool
		since  time.Duration
		tenant string
		none   bool
	}{
		{name: "tty", tty: true, all: true},
		{name: "no-tty", all: true, tenant: "acme"},
		{name: "json", json: true, since: time.Hour},
		{name: "none-open"},
		{name: "none-all", all: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &ListOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenant: tc.tenant, All: tc.all, Since: tc.since,
				Letters: func(_ context.Context, tenant string, o deadletter.ListOptions) ([]deadletter.Letter, error) {
					require.Equal(t, tc.tenant, tenant)
					require.Equal(t, tc.all, o.All)
					require.Equal(t, tc.since > 0, !o.Since.IsZero())
					if tc.since > 0 {
						require.WithinDuration(t, time.Now().Add(-tc.since), o.Since, time.Minute)
					}
					if tc.name == "none-open" || tc.name == "none-all" {
						return []deadletter.Letter{}, nil
					}
					return letters(), nil
				}}
			require.NoError(t, listRun(context.Background(), opts))
			require.Empty(t, s.ErrOut.String())
			golden.RequireEqual(t, s.Out.Bytes())
		})
	}
}

// `oml deadletter show`: an open dead letter with a damaged payload and a
// missing body, and a re-enqueued one, as key/value lines or JSON.
func TestShowRun_KeyValuesAndJSON(t *testing.T) {
	ls := letters()
	ev := func(seq int64, typ string) *deadletter.Event {
		return &deadletter.Event{Seq: seq, EventType: typ, RecordedAt: at, Hash: "ab12", KeyID: "k1", Payload: json.RawMessage(`{"a": 1}`)}
	}
	open := deadletter.Detail{Letter: ls[0], Source: ev(12, "claim.promoted"), Skipped: ev(13, "materialize.skipped"),
		Original: &deadletter.OutboxRow{Seq: 41, Payload: ls[0].Payload}, ImpliedPayload: json.RawMessage(`{"artifact_id":"a-1","version":3}`),
		BodyPresent: runtest.Ptr(false)}
	re := deadletter.Detail{Letter: ls[1], Source: ev(12, "claim.promoted"), ReenqueuedEvent: ev(14, "deadletter.reenqueued"),
		Copy: &deadletter.OutboxRow{Seq: 50, Payload: ls[1].Payload}, ImpliedPayload: ls[1].Payload, PayloadMatches: true,
		BodyPresent: runtest.Ptr(true), BodyDigestMatches: runtest.Ptr(true)}
	cases := []struct {
		name string
		tty  bool
		json bool
		d    deadletter.Detail
	}{
		{name: "open-tty", tty: true, d: open},
		{name: "open-json", json: true, d: open},
		{name: "reenqueued", d: re},
		{name: "abandoned", d: deadletter.Detail{Letter: ls[2]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &ShowOptions{IO: s.IO, Format: runtest.Format(tc.json), ID: tc.d.ID,
				Detail: func(_ context.Context, id int64) (deadletter.Detail, error) {
					require.Equal(t, tc.d.ID, id)
					return tc.d, nil
				}}
			require.NoError(t, showRun(context.Background(), opts))
			golden.RequireEqual(t, s.Out.Bytes())
		})
	}
}

// fakeRepair is the database and journal behind reenqueue and abandon: it
// records the ids it was asked to journal and answers with results.
type fakeRepair struct {
	open    []int64          // the open dead letters --all finds
	broken  map[int64]string // StillBroken's answers
	outcome map[int64]deadletter.Outcome
	journal [][]int64 // the ids of each Reenqueue/Abandon call
}

func (r *fakeRepair) results(ids []int64, by string) []deadletter.Result {
	res := make([]deadletter.Result, 0, len(ids))
	for _, id := range ids {
		o, ok := r.outcome[id]
		if !ok {
			o = deadletter.OutcomeReenqueued
		}
		x := deadletter.Result{ID: id, Tenant: acmeID, OutboxSeq: 40 + id, Outcome: o, JournalSeq: 20 + id, NewOutboxSeq: 60 + id, By: by}
		switch o {
		case deadletter.OutcomeAlreadyReenqueued, deadletter.OutcomeAlreadyAbandoned:
			x.At = runtest.Ptr(at)
		case deadletter.OutcomeFailed, deadletter.OutcomeNotFound, deadletter.OutcomeRefusedAbandoned:
			x.JournalSeq, x.NewOutboxSeq, x.Error = 0, 0, "refused: "+string(o)
		}
		res = append(res, x)
	}
	r.journal = append(r.journal, ids)
	return res
}

func openFake(context.Context) (*keys.Key, *pgxpool.Pool, error) { return nil, nil, nil }

// `oml deadletter reenqueue`'s decisions without a database: --all finds
// the open ones and asks on a terminal (unless --yes); a row whose cause
// still shows is held back (unless --force) and makes the exit 1, as does
// an id that could not be re-enqueued; results print as sentences or JSON.
func TestReenqueueRun_AsksHoldsBackAndPrints(t *testing.T) {
	cases := []struct {
		name        string
		tty, json   bool
		ids         []int64
		all, yes    bool
		force       bool
		answer      string
		repair      fakeRepair
		wantJournal [][]int64
		wantCode    cliutil.ExitCode
		stderr      string
	}{
		{name: "ids", ids: []int64{3, 4}, repair: fakeRepair{outcome: map[int64]deadletter.Outcome{4: deadletter.OutcomeAlreadyReenqueued}}, wantJournal: [][]int64{{3, 4}}},
		{name: "ids-json", json: true, ids: []int64{3}, wantJournal: [][]int64{{3}}},
		{name: "all-none", all: true, yes: true},
		{name: "all-none-json", all: true, yes: true, json: true},
		{name: "all-tty-yes", tty: true, all: true, answer: "y\n", repair: fakeRepair{open: []int64{3, 7}}, wantJournal: [][]int64{{3, 7}},
			stderr: "Re-enqueue 2 open dead letter(s) as ops? [y/N] "},
		{name: "all-tty-no", tty: true, all: true, answer: "n\n", repair: fakeRepair{open: []int64{3, 7}},
			stderr: "Re-enqueue 2 open dead letter(s) as ops? [y/N] Nothing re-enqueued.\n"},
		{name: "held-back", ids: []int64{3, 8}, repair: fakeRepair{broken: map[int64]string{8: "its held body is still missing"}}, wantJournal: [][]int64{{3}},
			wantCode: cliutil.ExitFindings, stderr: "oml: dead letter 8 was NOT re-enqueued: its held body is still missing, so the lake writer would dead-letter it again; repair it first (docs/deadletter.md), or pass --force\n"},
		{name: "all-held-back", ids: []int64{8}, repair: fakeRepair{broken: map[int64]string{8: "x"}}, wantCode: cliutil.ExitFindings,
			stderr: "oml: dead letter 8 was NOT re-enqueued: x, so the lake writer would dead-letter it again; repair it first (docs/deadletter.md), or pass --force\n"},
		{name: "force", ids: []int64{8}, force: true, repair: fakeRepair{broken: map[int64]string{8: "x"}}, wantJournal: [][]int64{{8}}},
		{name: "not-found", ids: []int64{3, 9}, repair: fakeRepair{outcome: map[int64]deadletter.Outcome{9: deadletter.OutcomeNotFound}}, wantJournal: [][]int64{{3, 9}},
			wantCode: cliutil.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			s.In.WriteString(tc.answer)
			r := tc.repair
			opts := &ReenqueueOptions{IO: s.IO, Format: runtest.Format(tc.json), Open: openFake,
				OpenIDs: func(_ context.Context, _ *pgxpool.Pool, tenant string) ([]int64, error) {
					require.Equal(t, "acme", tenant)
					return r.open, nil
				},
				StillBroken: func(_ context.Context, _ *pgxpool.Pool, id int64) (string, error) { return r.broken[id], nil },
				Reenqueue: func(_ context.Context, _ *pgxpool.Pool, _ chain.Signer, ids []int64, o deadletter.Options) ([]deadletter.Result, error) {
					require.Equal(t, deadletter.Options{By: "ops", Reason: "fixed"}, o)
					return r.results(ids, o.By), nil
				},
				IDs: tc.ids, All: tc.all, Tenant: "acme", Yes: tc.yes, Force: tc.force, By: "ops", Reason: "fixed"}
			err := reenqueueRun(context.Background(), opts)
			require.Equal(t, tc.wantJournal, r.journal)
			runtest.RequireOutput(t, s, err, tc.wantCode, tc.stderr)
		})
	}
}

// `oml deadletter abandon`: asks on a terminal unless --yes, prints each
// outcome, and exits 1 when one could not be abandoned.
func TestAbandonRun_AsksAndPrints(t *testing.T) {
	cases := []struct {
		name        string
		tty, json   bool
		yes         bool
		answer      string
		outcome     map[int64]deadletter.Outcome
		wantJournal [][]int64
		wantCode    cliutil.ExitCode
		stderr      string
	}{
		{name: "yes", yes: true, outcome: map[int64]deadletter.Outcome{3: deadletter.OutcomeAbandoned, 5: deadletter.OutcomeAlreadyAbandoned}, wantJournal: [][]int64{{3, 5}}},
		{name: "yes-json", yes: true, json: true, outcome: map[int64]deadletter.Outcome{3: deadletter.OutcomeAbandoned, 5: deadletter.OutcomeAbandoned}, wantJournal: [][]int64{{3, 5}}},
		{name: "tty-yes", tty: true, answer: "yes\n", outcome: map[int64]deadletter.Outcome{3: deadletter.OutcomeAbandoned, 5: deadletter.OutcomeAbandoned}, wantJournal: [][]int64{{3, 5}},
			stderr: "Abandon 2 dead letter(s) for good as ops? They will never reach the lake. [y/N] "},
		{name: "tty-no", tty: true, answer: "\n", stderr: "Abandon 2 dead letter(s) for good as ops? They will never reach the lake. [y/N] Nothing abandoned.\n"},
		{name: "refused", yes: true, outcome: map[int64]deadletter.Outcome{3: deadletter.OutcomeAbandoned, 5: deadletter.OutcomeRefusedAbandoned}, wantJournal: [][]int64{{3, 5}},
			wantCode: cliutil.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			s.In.WriteString(tc.answer)
			r := fakeRepair{outcome: tc.outcome}
			opts := &AbandonOptions{IO: s.IO, Format: runtest.Format(tc.json), Open: openFake,
				Abandon: func(_ context.Context, _ *pgxpool.Pool, _ chain.Signer, ids []int64, o deadletter.AbandonOptions) ([]deadletter.Result, error) {
					require.Equal(t, deadletter.AbandonOptions{By: "ops", Reason: "gone"}, o)
					return r.results(ids, o.By), nil
				},
				IDs: []int64{3, 5}, Yes: tc.yes, By: "ops", Reason: "gone"}
			err := abandonRun(context.Background(), opts)
			require.Equal(t, tc.wantJournal, r.journal)
			runtest.RequireOutput(t, s, err, tc.wantCode, tc.stderr)
		})
	}
}

// Errors keep their exits: what Open, the lookups or the engine return is
// the command's (already classified), and the engine's error is a
// configuration error (2); nothing is printed.
func TestRepairRun_ErrorsKeepTheirExits(t *testing.T) {
	openErr := cliutil.ConfigErrorf("no key")
	failOpen := func(context.Context) (*keys.Key, *pgxpool.Pool, error) { return nil, nil, openErr }
	engineErr := func(context.Context, *pgxpool.Pool, chain.Signer, []int64, deadletter.Options) ([]deadletter.Result, error) {
		return nil, errors.New("connection reset")
	}
	s := runtest.IO(false)
	err := reenqueueRun(context.Background(), &ReenqueueOptions{IO: s.IO, Format: runtest.Format(false), Open: failOpen, IDs: []int64{3}})
	require.Same(t, openErr, err)
	err = abandonRun(context.Background(), &AbandonOptions{IO: s.IO, Format: runtest.Format(false), Open: failOpen, IDs: []int64{3}, Yes: true})
	require.Same(t, openErr, err)
	err = reenqueueRun(context.Background(), &ReenqueueOptions{IO: s.IO, Format: runtest.Format(false), Open: openFake, IDs: []int64{3}, Force: true, Reenqueue: engineErr})
	require.Equal(t, cliutil.ExitUsage, cliutil.ExitCodeFor(err))
	lookupErr := cliutil.FlagErrorf("--tenant: unknown")
	err = reenqueueRun(context.Background(), &ReenqueueOptions{IO: s.IO, Format: runtest.Format(false), Open: openFake, All: true, Yes: true,
		OpenIDs: func(context.Context, *pgxpool.Pool, string) ([]int64, error) { return nil, lookupErr }})
	require.Same(t, lookupErr, err)
	err = listRun(context.Background(), &ListOptions{IO: s.IO, Format: runtest.Format(false),
		Letters: func(context.Context, string, deadletter.ListOptions) ([]deadletter.Letter, error) {
			return nil, openErr
		}})
	require.Same(t, openErr, err)
	err = showRun(context.Background(), &ShowOptions{IO: s.IO, Format: runtest.Format(false),
		Detail: func(context.Context, int64) (deadletter.Detail, error) { return deadletter.Detail{}, openErr }})
	require.Same(t, openErr, err)
	require.Empty(t, s.Out.String())
	require.Empty(t, s.ErrOut.String())
}

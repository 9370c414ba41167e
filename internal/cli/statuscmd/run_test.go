package statuscmd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// screen is a fake `oml status` read: a running writer with a backlog and
// a dead letter, acme witnessed, initech not; per kind a fork, a lake that
// lost its rows, a lake ahead of the database, or no lake at all.
func screen(kind string) Report {
	at := runtest.At
	seq := int64(10)
	r := Report{LastDrainAt: &at, WitnessesChecked: true, Warnings: []string{}, BodyLostClaims: 0,
		Lake: lakewriter.Status{Frontier: 120, FrontierAt: at, LastBatchStart: 101, LastBatchEnd: 120, LastSeq: 130, StableSeq: 128, BacklogRows: 10, BacklogSeqGap: 10,
			OldestUnapplied: &at, LagSeconds: 42, LeaseLive: true, DeadLetters: 1, OldestDeadAt: &at,
			Lease:      &lakewriter.Lease{Holder: "oml-lakewriter", Host: "db-1", PID: 4242, AcquiredAt: at, HeartbeatAt: at, ExpiresAt: at},
			Continuity: &lakewriter.Continuity{State: lakewriter.ContinuityOK}},
		Chains: []Chain{
			{Tenant: runtest.Acme, Name: "acme", Seq: 12, Hash: "ab12", UpdatedAt: at, WitnessSeq: &seq, WitnessTime: &at, Status: "ok"},
			{Tenant: runtest.Initech, Name: "initech", Seq: 3, Hash: "cd34", UpdatedAt: at, Status: "no-witness"},
		}}
	r.Lake.Blockers = cliutil.NonNil(r.Lake.Blockers)
	switch kind {
	case "fork":
		r.Chains[0].Status, r.Chains[0].Detail = "fork", "PostgreSQL holds another hash at seq 10"
	case "lake-missing":
		r.LakeMissing = "the lake holds none of the 120 rows the frontier says were drained: the wrong --lake, or a lost lake"
	case "lake-ahead":
		r.Lake.Continuity = &lakewriter.Continuity{State: lakewriter.ContinuityAhead, Detail: "the lake holds seq 140, the database drew 130", LakePosition: 140}
		r.Chains[0].Status = "tail-lost"
	case "no-lake":
		r.WitnessesChecked, r.Lake.Continuity = false, nil
		r.Chains[0].Status, r.Chains[1].Status, r.Chains[0].WitnessSeq, r.Chains[0].WitnessTime = "unchecked", "unchecked", nil, nil
		r.Warnings = []string{"no lake configured (--lake or OML_LAKE_URL): chain heads not compared with their witnesses"}
	}
	return r
}

// `oml status`'s run function without a database: the screen on and off a
// terminal, golden -o json, and exit 1 for a chain that disagrees with its
// witness, a lake that lost its rows or a lake ahead of the database.
func TestRun_ScreenAndExits(t *testing.T) {
	cases := []struct {
		name, kind string
		tty, json  bool
		wantCode   cliutil.ExitCode
	}{
		{name: "tty", tty: true}, {name: "no-tty"}, {name: "json", json: true},
		{name: "fork", kind: "fork", wantCode: cliutil.ExitFindings},
		{name: "lake-missing", kind: "lake-missing", wantCode: cliutil.ExitFindings},
		{name: "lake-ahead", kind: "lake-ahead", wantCode: cliutil.ExitFindings},
		{name: "lake-ahead-json", kind: "lake-ahead", json: true, wantCode: cliutil.ExitFindings},
		{name: "no-lake", kind: "no-lake"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			s.IO.SetStdoutTTY(tc.tty)
			opts := &Options{IO: s.IO, Format: runtest.Format(tc.json), durable: replication.Policy{},
				Read: func(context.Context, replication.Policy) (Report, error) { return screen(tc.kind), nil }}
			err := run(context.Background(), opts)
			runtest.RequireStreams(t, s, err, tc.wantCode)
			if tc.kind == "lake-ahead" {
				require.ErrorContains(t, err, "1 chain(s) disagree")
			}
		})
	}
}

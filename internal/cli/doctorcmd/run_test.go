package doctorcmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// checked is a fake doctor run: the database ok and the lease warning, or
// (failing) the lag failing too.
func checked(failing bool) doctor.Report {
	res := func(id string, s doctor.Status, summary string) doctor.Result {
		return doctor.Result{ID: id, Title: id, Status: s, Summary: summary, Data: map[string]any{}, Runbook: doctor.Runbook(id), CheckedAt: runtest.At, DurationSeconds: 0.02}
	}
	rep := doctor.Report{Status: doctor.StatusWarn, StartedAt: runtest.At, DurationSeconds: 0.05, Counts: map[doctor.Status]int{}, Checks: []doctor.Result{
		res(doctor.IDDatabase, doctor.StatusOK, "reachable, schema current"),
		res(doctor.IDDeadLetters, doctor.StatusWarn, "1 dead letter(s)"),
	}}
	if failing {
		rep.Status = doctor.StatusFail
		rep.Checks = append(rep.Checks, res(doctor.IDLag, doctor.StatusFail, "120000 row(s) behind"))
	}
	for _, c := range rep.Checks {
		rep.Counts[c.Status]++
	}
	return rep
}

// `oml doctor`'s run function without a database: the report on and off a
// terminal or as JSON, the metrics file, exit 1 on a failing check (or a
// warning under --strict), and exit 2 before any check for a URL that
// cannot be used or --watch off a terminal.
func TestRun_ReportsAndExits(t *testing.T) {
	cases := []struct {
		name        string
		tty, json   bool
		failing     bool
		strict      bool
		watch       bool
		dsn, lake   string
		metrics     bool
		wantChecked bool
		wantCode    cliutil.ExitCode
		wantErr     string
	}{
		{name: "warn-no-tty", wantChecked: true},
		{name: "warn-tty", tty: true, wantChecked: true},
		{name: "warn-json", json: true, wantChecked: true},
		{name: "warn-strict", strict: true, wantChecked: true, wantCode: cliutil.ExitFindings},
		{name: "fail", failing: true, wantChecked: true, wantCode: cliutil.ExitFindings},
		{name: "fail-json", json: true, failing: true, wantChecked: true, wantCode: cliutil.ExitFindings},
		{name: "metrics", metrics: true, wantChecked: true},
		{name: "bad-dsn", dsn: "postgres://%zz", wantCode: cliutil.ExitUsage},
		{name: "bad-lake", lake: "./lake", wantCode: cliutil.ExitUsage},
		{name: "watch-json", watch: true, json: true, wantCode: cliutil.ExitUsage, wantErr: "--watch is a terminal UI"},
		{name: "watch-no-tty", watch: true, wantCode: cliutil.ExitUsage, wantErr: "needs a terminal on stdout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			dsn := tc.dsn
			if dsn == "" {
				dsn = "postgres://oml@127.0.0.1:5432/oml"
			}
			ran := false
			opts := &Options{IO: s.IO, Format: runtest.Format(tc.json), Strict: tc.strict, Watch: tc.watch,
				DatabaseURL: func() string { return dsn }, LakeURL: func() string { return tc.lake },
				Checks: func(*Options) func(context.Context) doctor.Report {
					return func(context.Context) doctor.Report { ran = true; return checked(tc.failing) }
				}}
			if tc.metrics {
				opts.MetricsFile = filepath.Join(t.TempDir(), "oml.prom")
			}
			err := run(context.Background(), opts)
			require.Equal(t, tc.wantChecked, ran)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			}
			if tc.metrics {
				b, rerr := os.ReadFile(opts.MetricsFile)
				require.NoError(t, rerr)
				require.Contains(t, string(b), "oml_doctor")
			}
			runtest.RequireOutput(t, s, err, tc.wantCode, "")
		})
	}
}

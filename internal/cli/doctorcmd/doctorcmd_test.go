package doctorcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cli/doctorcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) {
	testdb.Main(m, testdb.WithTemplate(schema.Migrate))
}

func TestNewCmd_Flags(t *testing.T) {
	t.Parallel()
	def := doctor.DefaultThresholds()
	runtest.RunFlagCases(t, doctorcmd.NewCmd, []runtest.FlagCase[doctorcmd.Options]{
		{Args: "", Check: func(t *testing.T, o *doctorcmd.Options) {
			require.Equal(t, def, o.Thresholds)
			require.Equal(t, 10*time.Second, o.Interval)
			require.False(t, o.Watch || o.Strict || o.Deep)
		}},
		{Args: "--watch --interval 3s --strict --deep", Check: func(t *testing.T, o *doctorcmd.Options) {
			require.True(t, o.Watch && o.Strict && o.Deep)
			require.Equal(t, 3*time.Second, o.Interval)
		}},
		{Args: "--lag-warn 5s --lag-fail 1m --backlog-warn 10 --backlog-fail 20 --small-file-size 1MiB --vacuum-warn 10GB --checkpoint-warn 5 --checkpoint-fail 9",
			Check: func(t *testing.T, o *doctorcmd.Options) {
				require.Equal(t, 5*time.Second, o.Thresholds.LagWarn)
				require.Equal(t, time.Minute, o.Thresholds.LagFail)
				require.EqualValues(t, 20, o.Thresholds.BacklogFail)
				require.EqualValues(t, 1<<20, o.Thresholds.SmallFileSize)
				require.EqualValues(t, 10e9, o.Thresholds.VacuumWarn)
				require.EqualValues(t, 9, o.Thresholds.CheckpointFail)
			}},
		{Args: "--lag-warn 5m --lag-fail 1m", WantErr: "--lag-warn/--lag-fail: the fail threshold must be at least the warn threshold"},
		{Args: "--small-file-size lots", WantErr: "--small-file-size"},
		{Args: "--interval 10ms", WantErr: "--interval must be at least"},
		{Args: "--timeout 0s", WantErr: "--timeout must be positive"},
		{Args: "extra", WantErr: "unknown command"},
	})
}

// deployment is a migrated, initialised database with tenants, and a lake.
type deployment struct {
	url, lakeURL string
	lake         store.Store
	key          *keys.Key
	db           *testdb.DB
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	pool := db.Pool(t)
	k, err := keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, pool, k)
	require.NoError(t, err)
	dir := t.TempDir()
	lake, err := store.NewFile(dir)
	require.NoError(t, err)
	d := &deployment{url: db.URL, lakeURL: "file://" + dir, lake: lake, key: k, db: db}
	for i := range 2 {
		_, _, err := tenant.Create(ctx, pool, k, fmt.Sprintf("t%d", i))
		require.NoError(t, err)
	}
	return d
}

// load writes a workload (poison rows optional) and, when drain is set,
// drains it all.
func (d *deployment) load(t *testing.T, poison int, drain bool) {
	t.Helper()
	ctx := context.Background()
	pool := d.db.Pool(t)
	rows, err := pool.Query(ctx, `SELECT id FROM oml.tenants WHERE id <> '00000000-0000-0000-0000-000000000000'`)
	require.NoError(t, err)
	var cfg workload.Config
	for rows.Next() {
		var id [16]byte
		require.NoError(t, rows.Scan(&id))
		cfg.Tenants = append(cfg.Tenants, id)
	}
	rows.Close()
	cfg.Claims, cfg.PromoteRatio, cfg.Poison, cfg.Seed = 20, 0.8, poison, 11
	_, err = workload.Run(ctx, pool, d.key, cfg)
	require.NoError(t, err)
	if !drain {
		return
	}
	w, err := lakewriter.New(lakewriter.Options{DB: pool, Lake: d.lake, Signer: d.key, NoLease: true, PoisonBudget: 1,
		BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond, HorizonTimeout: 30 * time.Second})
	require.NoError(t, err)
	for range 20 {
		_, err := w.DrainOnce(ctx)
		require.NoError(t, err)
		var pending int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE seq > $1`, w.Frontier()).Scan(&pending))
		if pending == 0 {
			return
		}
	}
	t.Fatal("the lake never caught up")
}

type result struct {
	code           cliutil.ExitCode
	stdout, stderr string
}

func run(t *testing.T, env map[string]string, tty bool, args ...string) result {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	io.SetStdoutTTY(tty)
	code := cli.Run(context.Background(), io, append([]string{"doctor", "--timeout", "60s"}, args...), func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

func (d *deployment) env() map[string]string {
	return map[string]string{"OML_DATABASE_URL": d.url, "OML_LAKE_URL": d.lakeURL}
}

func TestDoctor_CannotRun_ExitsTwo(t *testing.T) {
	t.Parallel()
	r := run(t, nil, false)
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "no database URL given")
	require.Empty(t, r.stdout)

	r = run(t, map[string]string{"OML_DATABASE_URL": "postgres://%zz"}, false)
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "malformed")

	r = run(t, map[string]string{"OML_DATABASE_URL": "postgres://localhost/x"}, false, "--watch")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "needs a terminal")
	require.Contains(t, r.stderr, "oml doctor -o json")

	r = run(t, map[string]string{"OML_DATABASE_URL": "postgres://localhost/x"}, true, "--watch", "-o", "json")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "no JSON form")

	r = run(t, map[string]string{"OML_DATABASE_URL": "postgres://localhost/x"}, false, "--horizon-warn", "1h", "--horizon-fail", "1m")
	require.Equal(t, cliutil.ExitUsage, r.code)
}

func TestDoctor_DatabaseDown_ExitsOneAndSaysSo(t *testing.T) {
	t.Parallel()
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	r := run(t, map[string]string{"OML_DATABASE_URL": "postgres://oml:s3cret@" + addr + "/oml?connect_timeout=2"}, false, "-o", "json")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stderr)
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	c, ok := rep.Check(doctor.IDDatabase)
	require.True(t, ok)
	require.Equal(t, doctor.StatusFail, c.Status)
	require.Contains(t, c.Summary, "cannot reach the database")
	require.NotContains(t, r.stdout+r.stderr, "s3cret") // never print a password
}

func TestDoctor_Healthy_ExitsZero_TableAndJSON(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.load(t, 0, true)

	r := run(t, d.env(), false)
	require.Equal(t, cliutil.ExitOK, r.code, r.stdout+r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Regexp(t, `^CHECK\s+STATUS\s+SUMMARY$`, lines[0])
	for i, id := range doctor.Checks() {
		want := `(ok|skipped)`
		if id == doctor.IDReplication {
			want = `warn` // the test cluster is a single node
		}
		require.Regexp(t, "^"+id+`\s+`+want+`\s+\S`, lines[i+1])
	}
	require.Contains(t, r.stdout, "doctor warn:")
	require.NotContains(t, r.stdout, "\x1b[") // no colour off a terminal
	require.Empty(t, r.stderr)

	tty := run(t, d.env(), true)
	require.Equal(t, cliutil.ExitOK, tty.code)
	require.Contains(t, tty.stdout, "\x1b[32mok") // colour on a terminal

	r = run(t, d.env(), false, "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Equal(t, "warn", doc["status"]) // replication: a single node
	require.Equal(t, map[string]any{"ok": float64(11), "warn": float64(1), "fail": float64(0), "skipped": float64(1)}, doc["counts"])
	checks := doc["checks"].([]any)
	require.Len(t, checks, len(doctor.Checks()))
	for _, c := range checks {
		m := c.(map[string]any)
		for _, k := range []string{"id", "title", "status", "summary", "details", "data", "runbook", "checked_at", "duration_seconds"} {
			require.Containsf(t, m, k, "check %v has no %q", m["id"], k)
		}
	}
}

func TestDoctor_WarningsExitZeroUnlessStrict_FailuresExitOne(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.load(t, 2, true) // two poison rows: dead letters, a warning

	r := run(t, d.env(), false)
	require.Equal(t, cliutil.ExitOK, r.code, r.stdout+r.stderr)
	require.Regexp(t, `(?m)^dead-letters\s+warn\s`, r.stdout)
	require.Contains(t, r.stdout, "runbook: docs/runbooks/dead-letters.md")

	r = run(t, d.env(), false, "--strict")
	require.Equal(t, cliutil.ExitFindings, r.code)
	require.Contains(t, r.stderr, "dead-letters")
	require.Contains(t, r.stderr, "--strict")

	r = run(t, d.env(), false, "--dead-letters-fail", "1")
	require.Equal(t, cliutil.ExitFindings, r.code)
	require.Contains(t, r.stderr, "1 check(s) failed: dead-letters")

	r = run(t, d.env(), false, "-o", "json", "--dead-letters-fail", "1")
	require.Equal(t, cliutil.ExitFindings, r.code)
	require.Empty(t, r.stderr) // JSON consumers read the document, not stderr
}

func TestDoctor_LagPastThreshold_ExitsOne(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.load(t, 0, false) // nobody drains
	r := run(t, d.env(), false, "--backlog-warn", "1", "--backlog-fail", "1")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stdout)
	require.Regexp(t, `(?m)^lag\s+fail\s+\d+ row\(s\) behind`, r.stdout)
	require.Contains(t, r.stdout, "runbook: docs/runbooks/lag.md")
	require.Contains(t, r.stderr, "failed: lag")
}

// TestDoctor_Watch_RunsTheUIOnATerminalAndQuits drives `oml doctor --watch`
// through the CLI with a terminal on stdout and "j", "q" typed (read in one
// go, as fast typing arrives; the interaction flow is tested with teatest in
// internal/doctor/tui).
func TestDoctor_Watch_RunsTheUIOnATerminalAndQuits(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	io, in, out, errOut := iostreams.Test()
	io.SetStdoutTTY(true)
	in.WriteString("jq")
	env := d.env()
	// A deadline only so a regression cannot hang the suite; the UI must
	// end because of the "q", well before it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cli.Run(ctx, io, []string{"doctor", "--watch"}, func(k string) string { return env[k] })
	require.NoError(t, ctx.Err(), "the UI did not quit on q")
	require.Equal(t, cliutil.ExitOK, code, errOut.String())
	require.Contains(t, out.String(), "oml doctor")
	require.Contains(t, out.String(), "q quit")
}

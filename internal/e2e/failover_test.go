package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// The operator's view of a failover that lost a tail the lake had drained,
// through the whole command line, with a real primary, a real streaming
// standby and a file lake.

type failoverEnv struct {
	env
	primary, standby *testdb.Node
}

func newFailoverEnv(t *testing.T) *failoverEnv {
	t.Helper()
	e, primary := privateDeployment(t)
	return &failoverEnv{env: e, primary: primary, standby: testdb.StartStandby(t, primary)}
}

// privateDeployment is deployment on a cluster of its own (a replication
// primary with no standby yet): nothing another test does — an open
// transaction holding the snapshot horizon, a standby — can change what
// this one sees.
func privateDeployment(t *testing.T) (env, *testdb.Node) {
	t.Helper()
	primary := testdb.NewPrimary(t)
	url := primary.CreateDatabase(t, "oml", schema.Migrate)
	dir := t.TempDir()
	e := env{
		cliutil.EnvDatabaseURL:    url,
		cliutil.EnvLakeURL:        "file://" + filepath.Join(dir, "lake"),
		cliutil.EnvSigningKeyFile: filepath.Join(dir, "deploy.key"),
	}
	e.ok(t, "key", "generate", "--out", e[cliutil.EnvSigningKeyFile])
	e.ok(t, "init")
	return e, primary
}

// doctorCheck runs `oml doctor -o json` (never --deep) and returns its exit
// code and the named check.
func (e env) doctorCheck(t *testing.T, id string) (cliutil.ExitCode, map[string]any) {
	t.Helper()
	r := e.run(t, "doctor", "-o", "json")
	var rep struct {
		Checks []map[string]any `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stderr)
	for _, c := range rep.Checks {
		if c["id"] == id {
			return r.code, c
		}
	}
	t.Fatalf("doctor has no %s check", id)
	return 0, nil
}

func (e env) lastSeq(t *testing.T) float64 {
	t.Helper()
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.run(t, "lake", "status", "-o", "json").stdout), &st))
	return st["last_seq"].(float64)
}

// The standby is promoted after losing a tail the lake drained past: the
// first `oml lake drain --once` refuses with exit 1, naming the last seq
// both agree on; doctor fails its continuity check without --deep;
// `oml status` and `oml lake status` exit 1 and say so. The application
// then writes new events (and a tenant) on the promoted database: every
// drain still exits 1 — none exits 0 while a row would be skipped or
// duplicated.
func TestFailover_PromotedStandbyLostTail_DrainRefusesDoctorStatusFail(t *testing.T) {
	t.Parallel()
	e := newFailoverEnv(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "15", "--seed", "1")
	e.ok(t, "lake", "drain", "--once")
	code, c := e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitOK, code)
	require.Equal(t, "ok", c["status"])
	agreed := e.lastSeq(t)

	promoted := testdb.LoseTail(t, e.primary, e.standby, func() {
		e.ok(t, "dev", "load", "--tenants", "2", "--claims", "30", "--seed", "2")
		e.ok(t, "lake", "drain", "--once")
	})
	e.env[cliutil.EnvDatabaseURL] = promoted.URL("oml")

	r := e.run(t, "lake", "drain", "--once")
	require.Equalf(t, cliutil.ExitFindings, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "the lake is ahead of the database")
	require.Contains(t, r.stderr, "timeline 2")

	code, c = e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code, "doctor fails without --deep")
	require.Equal(t, "fail", c["status"])
	data := c["data"].(map[string]any)
	require.Equal(t, "lake-ahead", data["state"])
	require.Equal(t, agreed, data["last_agreed_seq"])
	require.Equal(t, float64(1), data["lake_timeline"])
	require.Equal(t, float64(2), data["database_timeline"])
	require.Equal(t, "docs/runbooks/continuity.md", c["runbook"])

	r = e.run(t, "status")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stderr)
	require.Contains(t, r.stdout, "FAILED: lake-ahead")
	r = e.run(t, "lake", "status")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stderr)
	require.Contains(t, r.stdout, "continuity")
	require.Contains(t, r.stdout, "FAILED")

	// The application writes on the promoted database.
	e.ok(t, "tenant", "create", "newcomer")
	// More rows than the lost tail held, so the promoted outbox passes the
	// lake's position (below it the lake is only ahead, not diverged).
	e.ok(t, "dev", "load", "--tenants", "3", "--claims", "40", "--seed", "3")
	for i := 0; i < 2; i++ {
		r := e.run(t, "lake", "drain", "--once")
		require.Equalf(t, cliutil.ExitFindings, r.code, "drain %d: stdout %s stderr %s", i, r.stdout, r.stderr)
		require.Contains(t, r.stderr, "diverged from the database")
	}
	code, c = e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Equal(t, "diverged", c["data"].(map[string]any)["state"])
}

// A point-in-time restore (same system identifier, a new timeline, behind
// the lake) takes the same path.
func TestFailover_PointInTimeRestoreBehindLake_DrainRefusesDoctorFails(t *testing.T) {
	t.Parallel()
	e := newFailoverEnv(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "10", "--seed", "4")
	e.ok(t, "lake", "drain", "--once")
	backup := testdb.TakeBaseBackup(t, e.primary)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "20", "--seed", "5")
	e.ok(t, "lake", "drain", "--once")
	restored := backup.Restore(t)
	e.env[cliutil.EnvDatabaseURL] = restored.URL("oml")

	r := e.run(t, "lake", "drain", "--once")
	require.Equalf(t, cliutil.ExitFindings, r.code, "stderr %s", r.stderr)
	code, c := e.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code)
	data := c["data"].(map[string]any)
	require.Equal(t, "lake-ahead", data["state"])
	require.Equal(t, data["lake_system_identifier"], data["database_system_identifier"])
}

// A lake of another deployment (a wrong --lake) is recognised as such:
// the drain refuses (a configuration error, exit 2) and writes nothing,
// doctor's continuity check and `oml status` fail naming it.
func TestFailover_LakeOfAnotherDeployment_RecognisedByDrainDoctorStatus(t *testing.T) {
	t.Parallel()
	a := deployment(t)
	a.ok(t, "dev", "load", "--tenants", "1", "--claims", "5", "--seed", "6")
	a.ok(t, "lake", "drain", "--once")
	b := deployment(t)
	b.ok(t, "dev", "load", "--tenants", "1", "--claims", "5", "--seed", "7")
	b[cliutil.EnvLakeURL] = a[cliutil.EnvLakeURL]

	r := b.run(t, "lake", "drain", "--once")
	require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "another deployment")
	code, c := b.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Equal(t, "other-deployment", c["data"].(map[string]any)["state"])
	r = b.run(t, "status")
	require.Equal(t, cliutil.ExitFindings, r.code)
	require.Contains(t, r.stdout, "other-deployment")
	// a's own view is untouched.
	code, _ = a.doctorCheck(t, "continuity")
	require.Equal(t, cliutil.ExitOK, code)
}

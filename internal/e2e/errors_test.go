package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testdb"
)

// oneLine asserts r failed with exit code want and a single error sentence
// (plus the usage hint of a usage error) containing every want string.
func oneLine(t *testing.T, r result, code cliutil.ExitCode, wants ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) == 2 && strings.HasPrefix(lines[1], "Run 'oml --help'") {
		lines = lines[:1]
	}
	require.Len(t, lines, 1, r.stderr)
	for _, w := range wants {
		require.Contains(t, r.stderr, w)
	}
	require.NotContains(t, r.stderr, "SQLSTATE")
}

// Before `oml init` (nothing applied, or only `oml migrate`) every command
// says which to run, never the SQLSTATE of a missing relation.
func TestBinary_BeforeInit_HintsSayInit_NoSQLSTATE(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.Empty())
	dir := t.TempDir()
	e := env{
		cliutil.EnvDatabaseURL:    db.URL,
		cliutil.EnvLakeURL:        "file://" + filepath.Join(dir, "lake"),
		cliutil.EnvSigningKeyFile: filepath.Join(dir, "deploy.key"),
	}
	e.ok(t, "key", "generate", "--out", e[cliutil.EnvSigningKeyFile])
	for _, args := range [][]string{{"chain", "verify"}, {"chain", "head"}, {"tenant", "list"}, {"status"}, {"dev", "load"}} {
		oneLine(t, e.bin(t, args...), cliutil.ExitUsage, "run `oml init` first")
	}
	r := e.bin(t, "doctor")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stdout)
	require.Contains(t, r.stdout, "run oml init")

	e.ok(t, "migrate")
	for _, args := range [][]string{{"tenant", "create", "acme"}, {"dev", "load", "--tenants", "1", "--claims", "1"}, {"chain", "verify"}} {
		oneLine(t, e.bin(t, args...), cliutil.ExitUsage, "`oml init`")
	}
}

// With the database down, doctor says the connection error once (in the
// database row), not again in every check it skipped for it.
func TestBinary_DoctorDatabaseDown_ConnectionErrorOnce(t *testing.T) {
	t.Parallel()
	e := env{cliutil.EnvDatabaseURL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}
	r := e.bin(t, "doctor")
	require.Equal(t, cliutil.ExitFindings, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "see its row")
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "skipped") {
			require.NotContains(t, l, "connection refused", "a skipped row repeats the connection error: %s", r.stdout)
		}
	}
	rows, _, found := strings.Cut(r.stdout, "\nfail ")
	require.True(t, found, r.stdout)
	require.Equal(t, 1, strings.Count(rows, "cannot reach the database"), "once in the check rows (the failure's details below repeat it once):\n%s", rows)
}

// A missing argument is a sentence naming it; a Delta table oml refuses
// for a feature it does not support is "ran and found a problem" (1).
func TestBinary_MissingArgumentNamed_UnsupportedDeltaFeatureExit1(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deadletter", "show"}, "oml deadletter show needs ID"},
		{[]string{"lake", "inspect"}, "oml lake inspect needs TABLE"},
		{[]string{"lake", "history"}, "oml lake history needs TABLE"},
	} {
		r := env{}.bin(t, c.args...)
		oneLine(t, r, cliutil.ExitUsage, c.want)
		require.NotContains(t, r.stderr, "arg(s)")
	}

	table := filepath.Join(t.TempDir(), "dv")
	require.NoError(t, os.MkdirAll(filepath.Join(table, "_delta_log"), 0o755))
	commit := `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}
{"metaData":{"id":"5f3c4a3e-0000-4000-8000-000000000001","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{"delta.enableDeletionVectors":"true"},"createdTime":1700000000000}}
`
	require.NoError(t, os.WriteFile(filepath.Join(table, "_delta_log", "00000000000000000000.json"), []byte(commit), 0o644))
	oneLine(t, env{}.bin(t, "lake", "inspect", "file://"+table), cliutil.ExitFindings, "deletionVectors")
}

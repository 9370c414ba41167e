package maintain_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/workload"
)

type cliResult struct {
	code   cliutil.ExitCode
	stdout string
	stderr string
}

func (b *bundle) oml(t *testing.T, args ...string) cliResult {
	t.Helper()
	env := map[string]string{cliutil.EnvDatabaseURL: b.DB.URL, cliutil.EnvLakeURL: "file://" + b.lakeDir}
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, args, func(k string) string { return env[k] })
	return cliResult{code, out.String(), errOut.String()}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}

type jsonTables struct {
	Tables []map[string]any `json:"tables"`
}

func tableByName(t *testing.T, tabs []map[string]any, suffix string) map[string]any {
	t.Helper()
	for _, m := range tabs {
		if strings.HasSuffix(m["table"].(string), suffix) && m["exists"] == true {
			return m
		}
	}
	t.Fatalf("no existing table ending in %s in %v", suffix, tabs)
	return nil
}

// The maintenance commands end to end through the CLI on a drained lake
// holding erased claims: plan, optimize (erase bodies + compact),
// checkpoint, the vacuum guard, vacuum, erasure-status at each stage.
func TestCLI_MaintenanceCommandsAndErasureStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 30, PromoteRatio: 1, RetractRatio: 0.6, Seed: 11, Concurrency: 1})
	b.drainAll(t, b.drainer(t, 5))

	// Usage errors: exit 2, one line on stderr.
	for _, args := range [][]string{
		{"lake", "optimize", "--table", "platinum"},
		{"lake", "optimize", "--min-files", "1"},
		{"lake", "vacuum", "--retain", "soon"},
		{"lake", "vacuum", "--retain", "0s", "--force"},
		{"lake", "maintain", "--target-size", "big"},
	} {
		r := b.oml(t, args...)
		require.Equal(t, cliutil.ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.True(t, strings.HasPrefix(r.stderr, "oml: "), "%v: %q", args, r.stderr)
		require.NotContains(t, r.stderr, "goroutine", "%v: no stack trace", args)
	}

	// The plan: silver needs its erased bodies erased; dry run changes nothing.
	r := b.oml(t, "lake", "maintain", "--dry-run", "--table", "silver", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	plan := decode[jsonTables](t, r.stdout)
	silver := tableByName(t, plan.Tables, "/silver/claims")
	require.Equal(t, "erase-bodies", silver["plan"].([]any)[0].(map[string]any)["task"])
	version := silver["version"]
	r = b.oml(t, "lake", "maintain", "--dry-run", "--table", "silver", "-o", "json")
	require.Equal(t, version, tableByName(t, decode[jsonTables](t, r.stdout).Tables, "/silver/claims")["version"])

	r = b.oml(t, "lake", "erasure-status", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	st := decode[struct {
		Claims []map[string]any `json:"claims"`
	}](t, r.stdout)
	require.NotEmpty(t, st.Claims)
	for _, c := range st.Claims {
		require.Contains(t, []any{"in-live-files", "never-in-lake"}, c["stage"])
	}

	r = b.oml(t, "lake", "optimize", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	opt := decode[jsonTables](t, r.stdout)
	silver = tableByName(t, opt.Tables, "/silver/claims")
	require.Positive(t, silver["erase_bodies"].(map[string]any)["bodies_nulled"])
	require.Positive(t, silver["optimize"].(map[string]any)["files_removed"], r.stdout)
	bronze := tableByName(t, opt.Tables, b.Tenants[0].String()+"/bronze/events")
	require.Positive(t, bronze["optimize"].(map[string]any)["files_removed"])
	b.verifyLake(t)

	r = b.oml(t, "lake", "checkpoint", "--force", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	for _, tab := range decode[jsonTables](t, r.stdout).Tables {
		if tab["exists"] == true {
			require.Equal(t, tab["version"], tab["new_checkpoint_version"], "%v", tab)
		}
	}
	r = b.oml(t, "lake", "checkpoint")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "up to date")

	r = b.oml(t, "lake", "erasure-status", "--pending")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "in-removed-files")
	require.NotContains(t, r.stdout, "in-live-files")

	// Default retention: nothing is old enough yet.
	r = b.oml(t, "lake", "vacuum", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	for _, tab := range decode[jsonTables](t, r.stdout).Tables {
		require.Empty(t, tab["files"], "%v", tab)
	}
	r = b.oml(t, "lake", "vacuum", "--table", "silver", "--retain", "0s", "--force", "--i-understand-this-breaks-time-travel", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.NotEmpty(t, tableByName(t, decode[jsonTables](t, r.stdout).Tables, "/silver/claims")["files"])

	r = b.oml(t, "lake", "erasure-status", "--pending", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Empty(t, decode[struct {
		Claims []map[string]any `json:"claims"`
	}](t, r.stdout).Claims, "every erased claim's bytes are gone")

	r = b.oml(t, "lake", "maintain")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "TABLE\tTENANT\tTASK\tDONE\tWHY\n"), r.stdout)
	b.verifyLake(t)
}

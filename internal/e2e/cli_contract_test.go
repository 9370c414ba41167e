package e2e_test

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// A misspelt verb under any noun is a usage error (exit 2) that names the
// typo and suggests the verb, exactly like a misspelt top-level command; a
// cron job with a typo must not "pass" with the noun's help.
func TestBinary_TypodVerb_Exit2DidYouMean(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // the suggestion, or "" when nothing is close
	}{
		{[]string{"chain", "verfy"}, "verify"},
		{[]string{"tenant", "lst"}, "list"},
		{[]string{"lake", "frobnicate"}, ""},
		{[]string{"lake", "statsu"}, "status"},
		{[]string{"deadletter", "shwo"}, "show"},
		{[]string{"dev", "lod"}, "load"},
		{[]string{"key", "genrate"}, "generate"},
		{[]string{"verfy"}, ""}, // top level (cobra's own path)
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			r := env{}.bin(t, c.args...)
			require.Equal(t, cliutil.ExitUsage, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
			require.Empty(t, r.stdout, "no help on stdout for a typo")
			typo := c.args[len(c.args)-1]
			require.Contains(t, r.stderr, `unknown command "`+typo+`"`)
			if c.want != "" {
				require.Contains(t, r.stderr, "Did you mean this?\n\t"+c.want+"\n")
			}
		})
	}
	// The bare noun still prints its help and succeeds.
	r := env{}.bin(t, "chain")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Available Commands:")
}

// A wrong lake: every command that only reads leaves it uncreated, and
// with rows already drained (frontier > 0) the empty lake is a failure
// (exit 1) naming the lake and the frontier, never "healthy".
func TestBinary_WrongLake_ReadsCreateNothing_FrontierVsEmptyLakeFails(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "1", "--claims", "5", "--seed", "3")
	e.ok(t, "lake", "drain", "--once")

	nowhere := filepath.Join(t.TempDir(), "nonexistent", "dir", "lake")
	wrong := env{}
	maps.Copy(wrong, e)
	wrong[cliutil.EnvLakeURL] = "file://" + nowhere
	for _, args := range [][]string{
		{"doctor"}, {"doctor", "-o", "json"}, {"status"}, {"lake", "status"}, {"lake", "status", "--tables"}, {"reconcile"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			r := wrong.bin(t, args...)
			require.Equal(t, cliutil.ExitFindings, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
			require.NoDirExists(t, filepath.Dir(filepath.Dir(nowhere)), "oml %s created the lake", strings.Join(args, " "))
			if args[0] == "doctor" {
				require.Contains(t, r.stdout, nowhere)
				require.Contains(t, r.stdout, "frontier")
				return
			}
			require.Contains(t, r.stderr, "file://"+nowhere+" holds no oml tables")
			require.Contains(t, r.stderr, "frontier")
		})
	}
	for _, args := range [][]string{{"lake", "inspect", "file://" + nowhere + "/x/bronze/events"}, {"chain", "head"}, {"lake", "maintain", "--dry-run"}} {
		wrong.bin(t, args...)
		require.NoDirExists(t, filepath.Dir(filepath.Dir(nowhere)), "oml %s created the lake", strings.Join(args, " "))
	}

	// A relative lake is a configuration error: exit 2, one sentence, even
	// for doctor (which otherwise reports a lake it cannot open as a check).
	rel := env{}
	maps.Copy(rel, e)
	rel[cliutil.EnvLakeURL] = "./lake"
	for _, args := range [][]string{{"doctor", "--strict"}, {"status"}, {"lake", "status"}, {"reconcile"}} {
		r := rel.bin(t, args...)
		require.Equal(t, cliutil.ExitUsage, r.code, "oml %s: %s", strings.Join(args, " "), r.stderr)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, r.stderr)
		require.Contains(t, r.stderr, `"./lake" has no scheme`)
	}
}

// Before anything was drained a missing lake is no failure (the first
// drain creates it), and doctor still does not create it.
func TestBinary_FreshDeployment_MissingLakeNotCreatedNotFailed(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	lake := strings.TrimPrefix(e[cliutil.EnvLakeURL], "file://")
	r := e.bin(t, "doctor")
	require.Equal(t, cliutil.ExitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "does not exist: not probed")
	require.NoDirExists(t, lake)
	e.ok(t, "status")
	e.ok(t, "lake", "status")
	require.NoDirExists(t, lake)
}

// `oml version` names the module, the Go toolchain and the platform (and
// the commit and build time when the build recorded them).
func TestBinary_Version_ModuleGoVersionPlatform(t *testing.T) {
	t.Parallel()
	r := env{}.bin(t, "version", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var v struct {
		Version   string  `json:"version"`
		Module    string  `json:"module"`
		GoVersion string  `json:"go_version"`
		Platform  string  `json:"platform"`
		Commit    *string `json:"commit"`
		BuildTime *string `json:"build_time"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.NotEmpty(t, v.Version)
	require.Equal(t, "github.com/omlhq/oml", v.Module)
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, v.Platform)
	require.NotNil(t, v.Commit)
	require.NotNil(t, v.BuildTime)
	text := env{}.bin(t, "version")
	require.Contains(t, text.stdout, "go:")
	require.Contains(t, text.stdout, runtime.Version())
}

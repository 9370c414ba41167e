package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// A drain with nothing new reports zero new rows: the replay of the newest
// batch (which runs on every start) is counted apart, and with nothing to
// re-apply it is not an INFO log line.
func TestBinary_DrainNothingNew_ZeroNewRows_ReplayApartAndQuiet(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "10", "--seed", "8")

	type sum struct {
		Rows                 int `json:"rows"`
		Batches              int `json:"batches"`
		ReplayedRows         int `json:"replayed_rows"`
		ReplayedTableCommits int `json:"replayed_table_commits"`
		TableCommits         int `json:"table_commits"`
	}
	drain := func() (sum, string) {
		r := e.bin(t, "lake", "drain", "--once", "-o", "json")
		require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
		var s sum
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
		return s, r.stderr
	}
	first, _ := drain()
	require.Positive(t, first.Rows)
	require.Zero(t, first.ReplayedRows, "a fresh lake has nothing to replay")

	again, logs := drain()
	require.Zero(t, again.Rows, "nothing new")
	require.Zero(t, again.Batches)
	require.Positive(t, again.ReplayedRows, "the newest batch was replayed with its recorded bounds")
	require.Zero(t, again.ReplayedTableCommits, "and was in every table already")
	require.Zero(t, again.TableCommits)
	require.NotContains(t, logs, "replaying", "routine replay is a debug line: %s", logs)

	r := e.bin(t, "lake", "drain", "--once")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^new rows:\s+0$`, r.stdout)
	require.Contains(t, r.stdout, "already in every table, nothing re-applied")
	require.False(t, strings.Contains(r.stderr, "replaying"), r.stderr)

	// One wording for "no dead letters", singular for one row.
	for _, args := range [][]string{{"lake", "status"}, {"status"}} {
		out := e.ok(t, args...)
		require.Regexp(t, `(?m)^dead letters:\s+none`, out, "oml %s", strings.Join(args, " "))
		require.Regexp(t, `(?m)^backlog:\s+0 rows, seq gap 0`, out)
	}
	e.ok(t, "tenant", "create", "one-more") // two outbox rows: the genesis and tenant.created
	require.Regexp(t, `(?m)^backlog:\s+2 rows`, e.ok(t, "lake", "status"))
}

// JSON durations follow one convention: float seconds in *_seconds fields,
// never milliseconds or nanoseconds.
func TestBinary_JSONDurations_AreFloatSeconds(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	outs := map[string]string{}
	for _, args := range [][]string{
		{"dev", "load", "--tenants", "1", "--claims", "4", "-o", "json"},
		{"lake", "drain", "--once", "-o", "json"},
		{"lake", "maintain", "--dry-run", "-o", "json"},
		{"lake", "vacuum", "--dry-run", "-o", "json"},
		{"doctor", "-o", "json"},
		{"reconcile", "-o", "json"},
		{"chain", "verify", "-o", "json"},
		{"lake", "status", "-o", "json"},
	} {
		r := e.bin(t, args...)
		require.Contains(t, []cliutil.ExitCode{cliutil.ExitOK, cliutil.ExitFindings}, r.code, "oml %s: %s", strings.Join(args, " "), r.stderr)
		require.True(t, json.Valid([]byte(r.stdout)), r.stdout)
		require.NotRegexp(t, `"[a-z_]*_(ms|ns)"\s*:`, r.stdout, "oml %s", strings.Join(args, " "))
		outs[strings.Join(args[:2], " ")] = r.stdout
	}
	require.Regexp(t, `"elapsed_seconds": [0-9.e-]+`, outs["dev load"])
	require.Regexp(t, `"duration_seconds": [0-9.e-]+`, outs["lake drain"])
	require.Regexp(t, `"retention_seconds": 604800`, outs["lake maintain"])
	require.Regexp(t, `"duration_seconds": [0-9.e-]+`, outs["doctor -o"])
}

package outboxcmd_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

func TestNewCmdPrune_Flags(t *testing.T) {
	t.Parallel()
	older := func(want string) func(*testing.T, *outboxcmd.PruneOptions) {
		return func(t *testing.T, o *outboxcmd.PruneOptions) { require.Equal(t, want, o.OlderThan) }
	}
	runtest.RunFlagCases(t, outboxcmd.NewCmdPrune, []runtest.FlagCase[outboxcmd.PruneOptions]{
		{Args: "", Check: older("7d")},
		{Args: "--older-than 36h --yes", Check: older("36h")},
		{Args: "--older-than 0s --dry-run", Check: older("0s")},
		{Args: "--older-than -1d", WantErr: "--older-than"},
		{Args: "--older-than -5m", WantErr: "not a duration"},
		{Args: "--older-than 106752d", WantErr: "longer than the longest retention"},
		{Args: "--older-than 99999999999999999999d", WantErr: "longer than the longest retention"},
		{Args: "--older-than soon", WantErr: "not a duration"},
		{Args: "--batch-rows 0", WantErr: "--batch-rows"},
		{Args: "extra", WantErr: "unknown command"},
	})
}

// The command end to end, in process: off a terminal without --yes it only
// shows the plan; --dry-run -o json counts; --yes deletes; the default
// retention keeps young rows; no lake is a configuration error.
func TestOutboxPrune_EndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := clitest.New(t, "acme")
	e.Workload(t, "acme", workload.Config{Claims: 15, PromoteRatio: 0.8,
		RetractRatio: 0.3, Poison: 1, Seed: 5})
	code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	// Again: the materialize.skipped event's own row came after the first
	// run's stable prefix.
	code, _, stderr = e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	rows := func() int {
		var n int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox`).Scan(&n))
		return n
	}
	before := rows()

	code, out, stderr := e.Run(t, nil, "outbox", "prune")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Would delete 0 outbox rows", "the default 7d retention keeps rows minutes old")

	code, out, stderr = e.Run(t, nil, "outbox", "prune", "--older-than", "0s")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Would delete")
	require.Contains(t, stderr, "pass --yes")
	require.Equal(t, before, rows())

	code, out, stderr = e.Run(t, nil, "outbox", "prune", "--older-than", "0s", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var plan map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	require.Equal(t, true, plan["dry_run"])
	require.Greater(t, plan["rows"].(float64), 0.0)
	require.Equal(t, before, rows())

	// lake maintain --prune-outbox --dry-run counts the same rows.
	code, out, stderr = e.Run(t, nil, "lake", "maintain", "--prune-outbox", "--older-than", "0s", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var maint struct {
		OutboxPrune map[string]any `json:"outbox_prune"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &maint))
	require.Equal(t, plan["rows"], maint.OutboxPrune["rows"])
	require.Equal(t, before, rows())
	code, _, stderr = e.Run(t, nil, "lake", "maintain", "--older-than", "0s")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "pass both")
	code, _, stderr = e.Run(t, nil, "lake", "maintain", "--prune-outbox", "--tenant", "acme")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "cannot be narrowed")

	code, out, stderr = e.Run(t, nil, "outbox", "prune", "--older-than", "0s", "--yes", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var done map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &done))
	require.Equal(t, false, done["dry_run"])
	require.Equal(t, plan["rows"], done["rows"])
	require.Equal(t, 1, rows(), "only the dead-lettered row is left")

	code, _, stderr = e.Run(t, nil, "reconcile")
	require.NotEqual(t, cliutil.ExitUsage, code, stderr)

	// The database behind the lake (a lost tail): refused, exit 1.
	var last int64
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT last_value FROM oml.outbox_seq_seq`).Scan(&last))
	_, err := e.Pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last-2)
	require.NoError(t, err)
	code, _, stderr = e.Run(t, nil, "outbox", "prune", "--older-than", "0s", "--yes")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	require.Contains(t, stderr, "ahead of the database")
	require.Contains(t, stderr, "nothing was pruned")
	_, err = e.Pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last)
	require.NoError(t, err)

	vars := e.Vars()
	delete(vars, cliutil.EnvLakeURL)
	code, _, stderr = e.Run(t, vars, "outbox", "prune", "--yes")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--lake")
}

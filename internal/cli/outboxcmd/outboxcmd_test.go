package outboxcmd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

func TestNewCmdPrune_Flags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args    string
		wantErr string
		older   string
	}{
		{args: "", older: "7d"},
		{args: "--older-than 36h --yes", older: "36h"},
		{args: "--older-than 0s --dry-run", older: "0s"},
		{args: "--older-than -1d", wantErr: "--older-than"},
		{args: "--older-than -5m", wantErr: "not a duration"},
		{args: "--older-than 106752d", wantErr: "longer than the longest retention"},
		{args: "--older-than 99999999999999999999d", wantErr: "longer than the longest retention"},
		{args: "--older-than soon", wantErr: "not a duration"},
		{args: "--batch-rows 0", wantErr: "--batch-rows"},
		{args: "extra", wantErr: "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			io, _, _, _ := iostreams.Test()
			got, _, err := runtest.Parse(io, tc.args, outboxcmd.NewCmdPrune)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				if !strings.Contains(tc.wantErr, "unknown") {
					require.Equal(t, cliutil.ExitUsage, cliutil.ExitCodeFor(err))
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.older, got.OlderThan)
		})
	}
}

// The command end to end, in process: off a terminal without --yes it only
// shows the plan; --dry-run -o json counts; --yes deletes; the default
// retention keeps young rows; no lake is a configuration error.
func TestOutboxPrune_EndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := clitest.New(t, "acme")
	_, err := workload.Run(ctx, e.Pool, e.Key, workload.Config{Tenants: []uuid.UUID{e.Tenants["acme"]}, Claims: 15, PromoteRatio: 0.8,
		RetractRatio: 0.3, Poison: 1, Seed: 5})
	require.NoError(t, err)
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
	_, err = e.Pool.Exec(ctx, `SELECT setval('oml.outbox_seq_seq', $1)`, last-2)
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

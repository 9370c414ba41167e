package deadlettercmd_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/deadlettercmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestNewCmdAbandon_Flags(t *testing.T) {
	t.Parallel()
	runtest.RunFlagCases(t, deadlettercmd.NewCmdAbandon, []runtest.FlagCase[deadlettercmd.AbandonOptions]{
		{Name: "ids", Args: "3 5 3 --reason gone --by ops --yes", Want: deadlettercmd.AbandonOptions{IDs: []int64{3, 5}, Reason: "gone", By: "ops", Yes: true}},
		{Name: "on a terminal asks", Args: "3 --reason gone --by ops", StdinTTY: true, Want: deadlettercmd.AbandonOptions{IDs: []int64{3}, Reason: "gone", By: "ops"}},
		{Name: "off a terminal without yes", Args: "3 --reason gone --by ops", WantErr: "pass --yes"},
		{Name: "no reason", Args: "3 --yes", WantErr: "--reason is required"},
		{Name: "blank reason", Args: "3 --yes --reason=", WantErr: "--reason is required"},
		{Name: "no ids", Args: "--reason gone --yes", WantErr: "name the dead letters to abandon"},
		{Name: "bad id", Args: "x --reason gone --yes", WantErr: "not a positive number"},
	})
}

// TestDeadletterCommands_AbandonEndToEnd: a dead letter whose held body is
// gone for good is abandoned through the commands: journalled, gone from
// the open list, reconcile exits 0 listing it as an accepted gap, doctor's
// dead-letters check is ok, re-enqueue is refused (exit 1), chain verify is
// clean.
func TestDeadletterCommands_AbandonEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	res := e.Workload(t, "acme", workload.Config{Claims: 20, PromoteRatio: 0.8,
		Poison: 1, Seed: 43})
	require.Len(t, res.Poison, 1)
	code, _, stderr := e.run(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, stderr := e.run(t, "deadletter", "list", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var letters []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &letters))
	require.Len(t, letters, 1)
	id := fmt.Sprint(letters[0]["id"])

	code, _, stderr = e.run(t, "deadletter", "abandon", id)
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--reason is required")

	code, out, stderr = e.run(t, "deadletter", "abandon", id, "--yes", "--by", "oncall", "--reason", "no backup holds the body")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Abandoned dead letter "+id)
	require.Contains(t, out, "deadletter.abandoned by oncall")

	code, out, _ = e.run(t, "deadletter", "list")
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, "No open dead letters.")
	code, out, _ = e.run(t, "deadletter", "list", "--all")
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, "abandoned, ")
	code, out, _ = e.run(t, "deadletter", "show", id)
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, "abandoned at ")
	require.Contains(t, out, "no backup holds the body")

	code, out, stderr = e.run(t, "reconcile")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
	require.Contains(t, out, "No findings")
	require.Contains(t, out, "1 accepted gap(s)")
	require.Contains(t, out, "accepted-gap")
	code, out, _ = e.run(t, "reconcile", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var rep struct {
		OK       bool             `json:"ok"`
		Accepted []map[string]any `json:"accepted"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.OK)
	require.Len(t, rep.Accepted, 1)

	code, out, _ = e.run(t, "doctor", "-o", "json")
	var doc struct {
		Checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	for _, c := range doc.Checks {
		if c.ID == "dead-letters" {
			require.Equal(t, "ok", c.Status)
		}
	}

	code, out, _ = e.run(t, "deadletter", "reenqueue", id, "--by", "oncall")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, out, "was abandoned")
	require.Contains(t, out, "cannot be re-enqueued")

	code, _, stderr = e.run(t, "chain", "verify", "--full")
	require.Equal(t, cliutil.ExitOK, code, stderr)
}

package deadlettercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cli/deadlettercmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

func TestNewCmdReenqueue_Flags(t *testing.T) {
	t.Parallel()
	runtest.RunFlagCases(t, deadlettercmd.NewCmdReenqueue, []runtest.FlagCase[deadlettercmd.ReenqueueOptions]{
		{Name: "ids", Args: "3 5 3 --by ops", Want: deadlettercmd.ReenqueueOptions{IDs: []int64{3, 5}, By: "ops"}},
		{Name: "reason", Args: "3 --by ops --reason fixed", Want: deadlettercmd.ReenqueueOptions{IDs: []int64{3}, By: "ops", Reason: "fixed"}},
		{Name: "all with yes", Args: "--all --yes --tenant acme --by ops", Want: deadlettercmd.ReenqueueOptions{All: true, Yes: true, Tenant: "acme", By: "ops"}},
		{Name: "all on a terminal asks", Args: "--all --by ops", StdinTTY: true, Want: deadlettercmd.ReenqueueOptions{All: true, By: "ops"}},
		{Name: "all without yes off a terminal", Args: "--all --by ops", WantErr: "pass --yes"},
		{Name: "nothing", Args: "", WantErr: "or pass --all"},
		{Name: "ids and all", Args: "3 --all --yes", WantErr: "not both"},
		{Name: "tenant without all", Args: "3 --tenant acme", WantErr: "--tenant only narrows --all"},
		{Name: "bad id", Args: "x", WantErr: `dead letter id "x" is not a positive number`},
		{Name: "zero id", Args: "0", WantErr: "not a positive number"},
	})
}

func TestNewCmdReenqueue_ByDefaultsToTheOSUser(t *testing.T) {
	t.Parallel()
	io, _, _, _ := iostreams.Test()
	var got *deadlettercmd.ReenqueueOptions
	cmd := deadlettercmd.NewCmdReenqueue(cliutil.New(io), func(_ context.Context, o *deadlettercmd.ReenqueueOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"7"})
	require.NoError(t, cmd.Execute())
	require.NotEmpty(t, got.By)
}

type env struct {
	*clitest.Env
	acme uuid.UUID // the tenant named acme
}

func setup(t *testing.T) *env {
	t.Helper()
	c := clitest.New(t, "acme")
	return &env{Env: c, acme: c.Tenants["acme"]}
}

func (e *env) run(t *testing.T, args ...string) (cliutil.ExitCode, string, string) {
	t.Helper()
	return e.Run(t, nil, args...)
}

// TestDeadletterCommands_RepairEndToEnd drives the repair through the
// binary's commands: a drained workload with one poison row of each kind;
// list (table and JSON), show, reconcile and status report them; the
// bodies are restored; reenqueue --all --yes re-enqueues all three, a second
// run says they already were; a drain applies them and reconcile is clean.
func TestDeadletterCommands_RepairEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	res := e.Workload(t, "acme", workload.Config{Claims: 30, PromoteRatio: 0.8,
		RetractRatio: 0.5, Poison: 3, Seed: 41})
	require.Len(t, res.Poison, 3)

	code, _, stderr := e.run(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, stderr := e.run(t, "deadletter", "list")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Equal(t, "ID\tTENANT\tOUTBOX SEQ\tTARGET\tOP\tCLAIM\tATTEMPTS\tFIRST FAILURE\tREENQUEUED\tERROR", lines[0])
	require.Contains(t, lines[1], "\tacme\t")
	require.Contains(t, lines[1], "\tno\t", lines[1])

	code, out, stderr = e.run(t, "deadletter", "list", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var letters []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &letters))
	require.Len(t, letters, 3)
	for _, k := range []string{"id", "tenant_id", "tenant", "outbox_seq", "journal_seq", "target", "op", "artifact_id", "version",
		"payload", "attempts", "first_failed_at", "last_failed_at", "error", "skipped_seq", "reenqueued", "reenqueued_at",
		"new_outbox_seq", "reenqueued_by", "reenqueue_reason"} {
		require.Contains(t, letters[0], k)
	}
	require.Equal(t, "acme", letters[0]["tenant"])
	first := fmt.Sprint(letters[0]["id"])

	code, out, stderr = e.run(t, "deadletter", "show", first)
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "materialize.skipped")
	require.Contains(t, out, "open: repair the cause, then oml deadletter reenqueue "+first)
	code, out, _ = e.run(t, "deadletter", "show", first, "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &detail))
	require.Equal(t, "materialize.skipped", detail["skipped_event"].(map[string]any)["event_type"])
	require.Contains(t, detail, "original_outbox_row")
	require.Contains(t, detail, "implied_payload")

	code, _, stderr = e.run(t, "deadletter", "show", "999999")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "no such dead letter 999999")

	code, out, _ = e.run(t, "reconcile", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code)
	var rep struct {
		OK     bool             `json:"ok"`
		Counts map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.OK)
	require.EqualValues(t, 3, rep.Counts["dead-lettered"])

	code, out, stderr = e.run(t, "status", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var st struct {
		Lake struct {
			DeadLetters int64 `json:"dead_letters"`
		} `json:"lake"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.EqualValues(t, 3, st.Lake.DeadLetters)

	// Scripts must say --yes.
	code, _, stderr = e.run(t, "deadletter", "reenqueue", "--all")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "pass --yes")

	// Repair the bodies (the damaged payload is re-derived by reenqueue).
	for _, p := range res.Poison {
		var err error
		switch p.Kind {
		case workload.PoisonDigestMismatch:
			_, err = e.Pool.Exec(ctx, `UPDATE oml.claim_bodies SET ciphertext = $4 WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
				p.Tenant, p.ArtifactID, p.Version, p.Body)
		case workload.PoisonMissingBody:
			_, err = e.Pool.Exec(ctx, `INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext) VALUES ($1, $2, $3, $4)`,
				p.Tenant, p.ArtifactID, p.Version, p.Body)
		}
		require.NoError(t, err)
	}

	code, out, stderr = e.run(t, "deadletter", "reenqueue", "--all", "--yes", "--by", "oncall", "--reason", "restored bodies")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Equal(t, 3, strings.Count(out, "Re-enqueued dead letter"), out)
	require.Contains(t, out, "re-derived from the journal")
	require.Contains(t, out, "Run oml lake drain")

	code, out, stderr = e.run(t, "deadletter", "reenqueue", first, "--by", "oncall")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "was already re-enqueued")
	require.Contains(t, out, "nothing to do")
	require.NotContains(t, out, "Run oml lake drain", "nothing new to drain")
	code, out, _ = e.run(t, "deadletter", "reenqueue", first, "--by", "oncall", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var results []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &results))
	require.Equal(t, "already-reenqueued", results[0]["outcome"])

	code, out, _ = e.run(t, "deadletter", "reenqueue", "999999", "--by", "oncall")
	require.Equal(t, cliutil.ExitFindings, code, "a dead letter that does not exist was not re-enqueued")
	require.Contains(t, out, "NOT re-enqueued")

	code, out, _ = e.run(t, "deadletter", "list")
	require.Equal(t, cliutil.ExitOK, code)
	require.Equal(t, "No open dead letters.\n", out)
	code, out, _ = e.run(t, "deadletter", "list", "--all", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &letters))
	require.Len(t, letters, 3)
	require.Equal(t, true, letters[0]["reenqueued"])
	require.Equal(t, "oncall", letters[0]["reenqueued_by"])

	code, _, stderr = e.run(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	code, out, stderr = e.run(t, "reconcile")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
	require.Contains(t, out, "No findings")

	code, out, stderr = e.run(t, "chain", "verify")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
}

// TestReenqueueAll_ConfirmsOnATerminal: --all without --yes asks on a
// terminal; "n" re-enqueues nothing (exit 0, said on stderr); "y" refuses
// the row nobody repaired, and "y" with --force re-enqueues it.
func TestReenqueueAll_ConfirmsOnATerminal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	e.Workload(t, "acme", workload.Config{Claims: 10, PromoteRatio: 0.9, Poison: 1, Seed: 42})
	code, _, stderr := e.run(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	runTTY := func(answer string, extra ...string) (cliutil.ExitCode, string, string) {
		io, in, out, errOut := iostreams.Test()
		io.SetStdinTTY(true)
		io.SetStdoutTTY(true)
		in.WriteString(answer)
		vars := map[string]string{"OML_DATABASE_URL": e.URL, "OML_LAKE_URL": e.Lake, "OML_SIGNING_KEY_FILE": e.KeyFile}
		args := append([]string{"deadletter", "reenqueue", "--all", "--by", "tty-user"}, extra...)
		code := cli.Run(ctx, io, args, func(k string) string { return vars[k] })
		return code, out.String(), errOut.String()
	}
	code, out, stderr := runTTY("n\n")
	require.Equal(t, cliutil.ExitOK, code, "declining is a decision, not a problem")
	require.Contains(t, stderr, "Re-enqueue 1 open dead letter(s) as tty-user? [y/N]")
	require.Contains(t, stderr, "Nothing re-enqueued.")
	require.Empty(t, out)
	var open int
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter WHERE reenqueued_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open)

	// Nobody repaired the body: re-enqueueing would only dead-letter it
	// again under a new id, so it is refused unless --force.
	code, out, stderr = runTTY("y\n")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	require.Contains(t, stderr, "was NOT re-enqueued: the held body of")
	require.Contains(t, stderr, "pass --force")
	require.NotContains(t, out, "Re-enqueued dead letter")
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter WHERE reenqueued_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open)

	code, out, stderr = runTTY("y\n", "--force")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Re-enqueued dead letter")
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter WHERE reenqueued_at IS NULL`).Scan(&open))
	require.Zero(t, open)
}

// An artifact id (and an error text) holding terminal escape sequences,
// as the application role can write them, is printed escaped by list and
// show, never sent raw to the terminal.
func TestDeadletterListAndShow_EscapeTerminalSequencesInArtifactID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	evil := "art\x1b]0;pwned\x07\x1b[2J\u202e"
	var id int64
	require.NoError(t, e.Pool.QueryRow(ctx, `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, version,
  payload, attempts, first_failed_at, last_failed_at, error, skipped_seq)
VALUES (999, $1, 1, 'silver.claims', 'materialize', $2, 1, '{}', 1, now(), now(), $3, 1) RETURNING id`,
		e.acme, evil, "boom\x1b[31m red").Scan(&id))
	for _, args := range [][]string{{"deadletter", "list"}, {"deadletter", "show", fmt.Sprint(id)}} {
		code, out, stderr := e.run(t, args...)
		require.Equal(t, cliutil.ExitOK, code, stderr)
		require.NotContains(t, out, "\x1b", "%v printed a raw escape", args)
		require.NotContains(t, out, "\u202e", "%v printed a raw bidi override", args)
		require.Contains(t, out, `art\x1b]0;pwned\x07\x1b[2J\u202e`, "%v", args)
	}
}

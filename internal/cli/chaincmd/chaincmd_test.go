package chaincmd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cli/chaincmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/witness"
)

func TestMain(m *testing.M) {
	testdb.Main(m, testdb.WithTemplate(schema.Migrate))
}

func TestNewCmdVerify_Flags(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	runtest.RunFlagCases(t, chaincmd.NewCmdVerify, []runtest.FlagCase[chaincmd.VerifyOptions]{
		{Args: "", Want: chaincmd.VerifyOptions{}},
		{Args: "--tenant acme --full --strict", Want: chaincmd.VerifyOptions{Tenant: "acme", Full: true, Strict: true}},
		{Args: "--tenant acme --from 12 --from-hash " + hash, Want: chaincmd.VerifyOptions{Tenant: "acme", From: 12, FromHash: hash}},
		{Args: "--from 12 --from-hash " + hash, WantErr: "--from needs --tenant"},
		{Args: "--tenant acme --from 12", Want: chaincmd.VerifyOptions{Tenant: "acme", From: 12}},
		{Args: "--tenant acme --from 12 --from-hash zz", WantErr: "64 hex characters"},
		{Args: "--tenant acme --from-hash " + hash, WantErr: "--from-hash needs --from"},
		{Args: "--tenant acme --from 12 --from-hash " + hash + " --since-checkpoint", WantErr: "contradict"},
		// --full is a no-op kept for compatibility: every chain is verified in full by default.
		{Args: "--tenant acme --from 12 --from-hash " + hash + " --full", Want: chaincmd.VerifyOptions{Tenant: "acme", From: 12, FromHash: hash, Full: true}},
		{Args: "--since-checkpoint", Want: chaincmd.VerifyOptions{SinceCheckpoint: true}},
		{Args: "--since-checkpoint --strict", WantErr: "cannot be combined"},
		{Args: "extra", WantErr: "unknown command"},
	})
}

type env struct {
	*clitest.Env
	acme uuid.UUID // the tenant named acme
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	c := clitest.New(t, "acme", "globex")
	e := &env{Env: c, acme: c.Tenants["acme"]}
	for _, name := range []string{"acme", "globex"} {
		_, err := chain.Append(ctx, e.Pool, e.Key, c.Tenants[name], claimEvents(t, 9)...)
		require.NoError(t, err)
	}
	return e
}

func (e *env) run(t *testing.T, args ...string) (cliutil.ExitCode, string, string) {
	t.Helper()
	return e.Run(t, nil, args...)
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := e.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func TestChainCommands_EndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)

	// Clean: verify exits 0 and lists three chains (TSV off a terminal).
	code, out, stderr := e.run(t, "chain", "verify")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, "TENANT\tNAME\tFROM\tSEQ\tHASH\tEVENTS\tSTATUS", lines[0])
	require.Contains(t, out, "\tacme\t0\t10\t")

	// Witness the heads; a second run finds them already witnessed.
	code, out, stderr = e.run(t, "chain", "witness")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Equal(t, 3, strings.Count(out, "\twitnessed"), out)
	code, out, _ = e.run(t, "chain", "witness", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var wrows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &wrows))
	require.Len(t, wrows, 3)
	require.Equal(t, false, wrows[0]["created"])

	code, out, stderr = e.run(t, "chain", "head", "--tenant", "acme", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var heads []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &heads))
	require.Len(t, heads, 1)
	require.Equal(t, "ok", heads[0]["status"])
	require.EqualValues(t, 10, heads[0]["witness_seq"])
	require.EqualValues(t, 10, heads[0]["checkpoint_seq"])

	// A lost failover: acme's last three events vanish and its head is
	// rewound. Only the witness (and the checkpoint) can tell.
	e.exec(t, `ALTER TABLE oml.journal DISABLE TRIGGER USER`)
	e.exec(t, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 7`, e.acme)
	e.exec(t, `ALTER TABLE oml.journal ENABLE TRIGGER USER`)
	e.exec(t, `UPDATE oml.chain_heads h SET seq = 7, hash = j.hash FROM oml.journal j
WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 7`, e.acme)

	// Resume from the witnessed head at seq 10 (hash taken from the lake).
	code, out, stderr = e.run(t, "chain", "verify", "--tenant", "globex", "--from", "10", "--no-checkpoint")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
	require.Contains(t, out, "\tglobex\t10\t10\t")
	code, _, stderr = e.run(t, "chain", "verify", "--tenant", "globex", "--from", "9")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "is witnessed at seq 9")

	code, _, stderr = e.run(t, "chain", "head")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, stderr, "tail-lost")

	code, out, stderr = e.run(t, "chain", "verify", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	var doc struct {
		OK       bool `json:"ok"`
		Findings []struct {
			Tenant   uuid.UUID         `json:"tenant"`
			Seq      int64             `json:"seq"`
			Reason   string            `json:"reason"`
			Evidence map[string]string `json:"evidence"`
		} `json:"findings"`
		Witnesses struct {
			Checked bool `json:"checked"`
		} `json:"witnesses"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.False(t, doc.OK)
	require.True(t, doc.Witnesses.Checked)
	require.Len(t, doc.Findings, 1)
	require.Equal(t, e.acme, doc.Findings[0].Tenant)
	require.EqualValues(t, 8, doc.Findings[0].Seq)
	require.Equal(t, "tail-lost", doc.Findings[0].Reason)

	// Table output names the finding and exits 1 with a one-line summary.
	code, out, stderr = e.run(t, "chain", "verify", "--tenant", "acme")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, out, "FIRST BAD SEQ")
	require.Contains(t, out, "\t8\ttail-lost\t")
	require.Contains(t, stderr, "1 chain(s) failed verification")
}

func TestChainVerify_ConnectionErrorsExit2(t *testing.T) {
	t.Parallel()
	io, _, _, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, []string{"chain", "verify"}, func(k string) string {
		if k == "OML_DATABASE_URL" {
			return "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2"
		}
		return ""
	})
	require.Equal(t, cliutil.ExitUsage, code)
	require.NotContains(t, errOut.String(), "secret")
}

func TestChainWitness_NeedsLakeAndKey(t *testing.T) {
	t.Parallel()
	io, _, _, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, []string{"chain", "witness"}, func(string) string { return "" })
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, errOut.String(), "no lake configured")
}

func TestChainVerify_UnknownTenantIsAUsageError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, _, stderr := e.run(t, "chain", "verify", "--tenant", "nope")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, `no tenant is named "nope"`)
}

func TestChainHead_ShowsAFailoverSinceTheWitness(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	heads, err := witness.Capture(ctx, e.Pool, &e.acme, time.Now())
	require.NoError(t, err)
	h := heads[0]
	h.Timeline = "00000009" // witnessed on another timeline
	require.NoError(t, h.Sign(e.Key))
	st, err := store.Open(ctx, e.Lake)
	require.NoError(t, err)
	_, err = witness.Publish(ctx, st, h)
	require.NoError(t, err)

	code, out, stderr := e.run(t, "chain", "head", "--tenant", "acme", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Equal(t, "ok", rows[0]["status"])
	require.Contains(t, rows[0]["failover"], "timeline 00000009")
}

func TestChainVerify_ProgressBarOnlyOnAStderrTerminal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	vars := map[string]string{"OML_DATABASE_URL": e.URL}
	for _, tty := range []bool{false, true} {
		io, _, _, errOut := iostreams.Test()
		io.SetStderrTTY(tty)
		code := cli.Run(context.Background(), io, []string{"chain", "verify", "--no-checkpoint"}, func(k string) string { return vars[k] })
		require.Equal(t, cliutil.ExitOK, code, errOut.String())
		// The bar is erased when done ("\r\x1b[K"), then the summary follows.
		require.Equal(t, tty, strings.Contains(errOut.String(), "\r\x1b[K"), "%q", errOut.String())
		require.Contains(t, errOut.String(), "verified 3 chains")
	}
}

// An edit of an old event after a clean run is found by the next plain
// `oml chain verify` and by the one after it; --since-checkpoint finds it
// too once a run has found it (the checkpoint moved back below it).
func TestChainVerify_OldEventEditedAfterACleanRun_FoundByTheNextPlainRunsAndTheFastPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, _, stderr := e.run(t, "chain", "verify")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	e.exec(t, `ALTER TABLE oml.journal DISABLE TRIGGER USER`)
	e.exec(t, `UPDATE oml.journal SET payload = set_byte(payload, 5, get_byte(payload, 5) # 1) WHERE tenant_id = $1 AND seq = 3`, e.acme)
	e.exec(t, `ALTER TABLE oml.journal ENABLE TRIGGER USER`)

	for _, args := range [][]string{{"chain", "verify"}, {"chain", "verify"}, {"chain", "verify", "--since-checkpoint"}, {"chain", "verify", "--full"}} {
		code, out, stderr := e.run(t, args...)
		require.Equal(t, cliutil.ExitFindings, code, "%v: %s", args, stderr)
		require.Contains(t, out, "\tacme\t3\thash-mismatch\t", "%v", args)
	}
}

// A garbage witness at a higher seq is a finding of its own and does not
// hide the older valid witness, and with it the lost tail.
func TestChainVerify_GarbageWitnessIsAFindingAndDoesNotHideALostTail(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	code, _, stderr := e.run(t, "chain", "witness")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	st, err := store.Open(ctx, e.Lake)
	require.NoError(t, err)
	require.NoError(t, st.PutIfAbsent(ctx, witness.Key(e.acme, 99), []byte("garbage")))
	e.exec(t, `ALTER TABLE oml.journal DISABLE TRIGGER USER`)
	e.exec(t, `DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > 7`, e.acme)
	e.exec(t, `ALTER TABLE oml.journal ENABLE TRIGGER USER`)
	e.exec(t, `UPDATE oml.chain_heads h SET seq = 7, hash = j.hash FROM oml.journal j
WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = 7`, e.acme)
	// No checkpoint to fall back on: only the witness knows about seq 10.
	e.exec(t, `DELETE FROM oml.chain_checkpoints`)

	code, out, stderr := e.run(t, "chain", "verify", "-o", "json", "--no-checkpoint")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	var doc struct {
		Findings []struct {
			Tenant uuid.UUID `json:"tenant"`
			Seq    int64     `json:"seq"`
			Reason string    `json:"reason"`
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Findings, 2, out)
	require.Equal(t, e.acme, doc.Findings[0].Tenant)
	require.Equal(t, "tail-lost", doc.Findings[0].Reason)
	require.EqualValues(t, 8, doc.Findings[0].Seq)
	require.Equal(t, "bad-witness", doc.Findings[1].Reason)
	require.EqualValues(t, 99, doc.Findings[1].Seq)
}

package statuscmd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

type env struct {
	*clitest.Env
	acme uuid.UUID // the tenant named acme
}

func setup(t *testing.T) *env {
	t.Helper()
	c := clitest.New(t, "acme")
	e := &env{Env: c, acme: c.Tenants["acme"]}
	e.Workload(t, "acme", workload.Config{Claims: 10, PromoteRatio: 0.8, Poison: 1, Seed: 61})
	return e
}

// TestStatus_OneScreenAndJSON: before and after a drain with a dead letter;
// the JSON shape; a chain that lost its tail (a witness beyond its head) exits 1; no
// database exits 2.
func TestStatus_OneScreenAndJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)

	code, out, stderr := e.Run(t, nil, "status")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "frontier:")
	require.Contains(t, out, "last drain:")
	require.Contains(t, out, "never")
	require.Contains(t, out, "CHAIN\tHEAD SEQ")

	code, _, stderr = e.Run(t, nil, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, stderr = e.Run(t, nil, "status", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	for _, k := range []string{"lake", "last_drain_at", "witnesses_checked", "chains", "warnings"} {
		require.Contains(t, doc, k)
	}
	lake := doc["lake"].(map[string]any)
	for _, k := range []string{"frontier", "lag_seconds", "backlog_rows", "lease", "dead_letters", "oldest_dead_letter_at", "blockers"} {
		require.Contains(t, lake, k)
	}
	require.EqualValues(t, 1, lake["dead_letters"])
	require.NotNil(t, doc["last_drain_at"])
	require.Equal(t, true, doc["witnesses_checked"])
	chains := doc["chains"].([]any)
	require.Len(t, chains, 2, "provider and acme")
	for _, c := range chains {
		require.Contains(t, []string{"ok", "no-witness"}, c.(map[string]any)["status"])
	}

	code, out, _ = e.Run(t, nil, "status")
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, "1 open")
	require.Contains(t, out, "oml deadletter list")

	// A witness beyond acme's head: PostgreSQL lost the chain's tail.
	heads, err := witness.Capture(ctx, e.Pool, &e.acme, time.Now())
	require.NoError(t, err)
	h := heads[0]
	h.Seq += 5
	h.Hash = strings.Repeat("ab", 32)
	require.NoError(t, h.Sign(e.Key))
	st, err := store.Open(ctx, e.Lake)
	require.NoError(t, err)
	created, err := witness.Publish(ctx, st, h)
	require.NoError(t, err)
	require.True(t, created)
	code, out, stderr = e.Run(t, nil, "status")
	require.Equal(t, cliutil.ExitFindings, code, out)
	require.Contains(t, out, "\ttail-lost")
	require.Contains(t, stderr, "disagree with their witnessed head")

	code, _, stderr = e.Run(t, map[string]string{"OML_DATABASE_URL": "postgres://u:secret@127.0.0.1:1/x?connect_timeout=2"}, "status")
	require.Equal(t, cliutil.ExitUsage, code)
	require.NotContains(t, stderr, "secret")
}

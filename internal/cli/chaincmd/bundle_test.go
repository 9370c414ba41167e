package chaincmd_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/workload"
)

// TestChainExport_VerifyBundleWithNoDatabase: export a tenant, copy the
// bundle to an empty directory, verify it with no database and no lake in
// the environment (exit 0); an edited event is exit 1 naming the seq; a
// truncated file and a missing file are exit 2; an existing --out is refused.
func TestChainExport_VerifyBundleWithNoDatabase(t *testing.T) {
	t.Parallel()
	c := clitest.New(t, "acme")
	c.Workload(t, "acme", workload.Config{Claims: 10, PromoteRatio: 0.6, Seed: 9})
	out := filepath.Join(t.TempDir(), "acme.bundle")

	code, stdout, stderr := c.Run(t, nil, "chain", "export", "--tenant", "acme", "--out", out)
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, stdout, "Wrote "+out)
	require.Contains(t, stdout, "oml chain verify --bundle")
	code, _, stderr = c.Run(t, nil, "chain", "export", "--tenant", "acme", "--out", out)
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "already exists")

	alone := filepath.Join(t.TempDir(), "copy.bundle")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(alone, b, 0o600))
	var root string
	require.NoError(t, c.Pool.QueryRow(context.Background(), `SELECT key_id FROM oml.journal WHERE seq = 1 AND event_type = 'key.issued'`).Scan(&root))

	nothing := map[string]string{} // no database, no lake, no key
	code, stdout, stderr = c.Run(t, nothing, "chain", "verify", "--bundle", alone, "--root-key-id", root)
	require.Equal(t, cliutil.ExitOK, code, stdout+stderr)
	require.Contains(t, stdout, "Verified:")
	code, stdout, _ = c.Run(t, nothing, "chain", "verify", "--bundle", alone, "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var doc struct {
		OK       bool  `json:"ok"`
		HeadSeq  int64 `json:"head_seq"`
		Findings []any `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	require.True(t, doc.OK)
	require.Positive(t, doc.HeadSeq)

	// One event's hash changed: the bundle names that event.
	lines := strings.Split(string(b), "\n")
	edited := false
	for i, l := range lines {
		if strings.Contains(l, `"tenant_id":"`+c.Tenants["acme"].String()+`","seq":5,`) {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m))
			m["hash"] = strings.Repeat("0", 64)
			nb, _ := json.Marshal(m)
			lines[i], edited = string(nb), true
		}
	}
	require.True(t, edited)
	require.NoError(t, os.WriteFile(alone, []byte(strings.Join(lines, "\n")), 0o600))
	code, stdout, stderr = c.Run(t, nothing, "chain", "verify", "--bundle", alone)
	require.Equal(t, cliutil.ExitFindings, code, stdout+stderr)
	require.Contains(t, stdout, "hash-mismatch")
	require.Regexp(t, `\s5\s+hash-mismatch`, stdout)

	// Cut short: exit 2, one sentence.
	require.NoError(t, os.WriteFile(alone, b[:len(b)/2], 0o600))
	code, _, stderr = c.Run(t, nothing, "chain", "verify", "--bundle", alone)
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "not a well-formed oml chain bundle")
	code, _, stderr = c.Run(t, nothing, "chain", "verify", "--bundle", filepath.Join(t.TempDir(), "none"))
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "no bundle at")
}

// TestChainVerifyBronze_DrainedTableVerifiesWithNoDatabase: after a drain,
// a tenant's bronze table verifies on its own by URL, and by a path under
// --lake; a path that is not a bronze table is a usage error.
func TestChainVerifyBronze_DrainedTableVerifiesWithNoDatabase(t *testing.T) {
	t.Parallel()
	c := clitest.New(t, "acme")
	c.Workload(t, "acme", workload.Config{Claims: 8, PromoteRatio: 0.6, Seed: 10})
	code, _, stderr := c.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	table := c.Lake + "/" + c.Tenants["acme"].String() + "/bronze/events"
	code, stdout, stderr := c.Run(t, map[string]string{}, "chain", "verify", "--bronze", table)
	require.Equal(t, cliutil.ExitOK, code, stdout+stderr)
	require.Contains(t, stdout, "Verified:")
	code, stdout, stderr = c.Run(t, map[string]string{cliutil.EnvLakeURL: c.Lake}, "chain", "verify", "--bronze", c.Tenants["acme"].String()+"/bronze/events", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stdout+stderr)
	code, _, stderr = c.Run(t, map[string]string{}, "chain", "verify", "--bronze", c.Lake+"/acme/silver/claims")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "bronze/events")
}

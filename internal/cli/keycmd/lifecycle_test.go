package keycmd_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

// TestKeyCommands_RotateListRevoke: rotate to a new key file, list both,
// revoke the old one signed by the new one, and the chain verifies; the
// refusals (no reason, self-revocation, scripts without --yes) are clean.
func TestKeyCommands_RotateListRevoke(t *testing.T) {
	t.Parallel()
	c := clitest.New(t, "acme")
	next, err := keys.Generate()
	require.NoError(t, err)
	nextFile := filepath.Join(t.TempDir(), "next.key")
	require.NoError(t, keys.WriteFile(nextFile, next, keys.WriteOptions{}))

	code, _, stderr := c.Run(t, nil, "key", "rotate", "--new", nextFile)
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "pass --yes")
	code, out, stderr := c.Run(t, nil, "key", "rotate", "--new", nextFile, "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Issued key "+next.KeyID())
	require.Contains(t, out, "oml key revoke "+c.Key.KeyID())

	code, out, stderr = c.Run(t, nil, "key", "list", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var ks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &ks))
	require.Len(t, ks, 2)
	require.Equal(t, "root", ks[0]["role"])
	require.Equal(t, "rotated", ks[1]["role"])

	// Still signing with the old key: it may not revoke itself.
	code, _, stderr = c.Run(t, nil, "key", "revoke", c.Key.KeyID(), "--reason", "lost", "--yes")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, stderr, "cannot revoke itself")
	code, _, stderr = c.Run(t, nil, "key", "revoke", c.Key.KeyID(), "--yes")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--reason is required")

	vars := c.Vars()
	vars[cliutil.EnvSigningKeyFile] = nextFile
	code, out, stderr = c.Run(t, vars, "key", "revoke", c.Key.KeyID(), "--reason", "laptop lost", "--by", "oncall", "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "Revoked key "+c.Key.KeyID())
	code, out, _ = c.Run(t, vars, "key", "list")
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, "provider seq")

	code, _, stderr = c.Run(t, vars, "tenant", "create", "globex")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	code, _, stderr = c.Run(t, nil, "tenant", "create", "initech")
	require.NotEqual(t, cliutil.ExitOK, code, "the revoked key can no longer append")
	require.Contains(t, stderr, "revoked")

	code, _, stderr = c.Run(t, vars, "chain", "verify", "--full")
	require.Equal(t, cliutil.ExitOK, code, stderr)
}

package keycmd_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
)

func run(args ...string) (cliutil.ExitCode, string, string) {
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, args, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

func TestKeyGenerateShowForce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k")
	code, out, _ := run("key", "generate", "--out", path, "-o", "json")
	require.Equal(t, cliutil.ExitOK, code)
	var gen struct {
		KeyID string `json:"key_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &gen))
	require.Len(t, gen.KeyID, 32)

	code, out, _ = run("key", "show", "--signing-key", path)
	require.Equal(t, cliutil.ExitOK, code)
	require.Contains(t, out, gen.KeyID)
	require.NotContains(t, out, "PRIVATE")

	code, _, errOut := run("key", "generate", "--out", path)
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, errOut, "--force")
	code, out, _ = run("key", "generate", "--out", path, "--force")
	require.Equal(t, cliutil.ExitOK, code)
	require.NotContains(t, out, gen.KeyID, "a forced generate writes a new key")

	code, _, errOut = run("key", "show")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, strings.SplitN(errOut, "\n", 2)[0], "no signing key given")
	code, _, errOut = run("key", "generate", "--out", filepath.Join(t.TempDir(), "no", "such", "dir", "k"))
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, errOut, "cannot create the key file")
}

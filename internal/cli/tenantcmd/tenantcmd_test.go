package tenantcmd_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

type result struct {
	code           cliutil.ExitCode
	stdout, stderr string
}

func run(env map[string]string, args ...string) result {
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, args, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

// The whole operator flow through the real CLI: key generate, init (twice,
// then with another key), tenant create (twice), tenant list.
func TestCLI_KeyInitTenantFlow(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.Empty())
	dir := t.TempDir()
	key, other := filepath.Join(dir, "deploy.key"), filepath.Join(dir, "other.key")
	env := map[string]string{"OML_DATABASE_URL": db.URL, "OML_SIGNING_KEY_FILE": key}

	r := run(env, "key", "generate", "--out", key)
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Wrote ed25519 key")
	r = run(env, "key", "generate", "--out", key)
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "refusing to overwrite")
	require.Equal(t, cliutil.ExitOK, run(env, "key", "generate", "--out", other).code)

	r = run(env, "tenant", "list")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "run `oml init` first")

	r = run(env, "init")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Initialised")
	r = run(env, "init")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to do")
	r = run(env, "init", "--signing-key", other)
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "different key")
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)

	r = run(env, "tenant", "create", "acme")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Created tenant acme")
	r = run(env, "tenant", "create", "acme", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var created struct {
		Name    string `json:"name"`
		Created bool   `json:"created"`
		HeadSeq int64  `json:"head_seq"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	require.Equal(t, "acme", created.Name)
	require.False(t, created.Created)
	require.Equal(t, int64(1), created.HeadSeq)

	r = run(env, "tenant", "list", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var list struct {
		Tenants []struct {
			Name string `json:"name"`
		} `json:"tenants"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Tenants, 1)
	r = run(env, "tenant", "list")
	require.Equal(t, cliutil.ExitOK, r.code)
	require.Contains(t, r.stdout, "NAME")
	require.Contains(t, r.stdout, "acme")
}

func TestCLI_BadInputIsOneLineAndExit2(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.key")
	require.NoError(t, os.WriteFile(junk, []byte("not a key"), 0o600))
	loose := filepath.Join(dir, "loose.key")
	require.Equal(t, cliutil.ExitOK, run(nil, "key", "generate", "--out", loose).code)
	require.NoError(t, os.Chmod(loose, 0o644))
	good := map[string]string{"OML_DATABASE_URL": db.URL}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing key file", good, []string{"tenant", "create", "a", "--signing-key", filepath.Join(dir, "nope")}, "does not exist"},
		{"no key at all", good, []string{"tenant", "create", "a"}, "no signing key given"},
		{"malformed key file", good, []string{"tenant", "create", "a", "--signing-key", junk}, "malformed"},
		{"world-readable key", good, []string{"tenant", "create", "a", "--signing-key", loose}, "chmod 600"},
		{"unreachable database", map[string]string{"OML_DATABASE_URL": "postgres://x@/db?host=" + dir + "&connect_timeout=2"}, []string{"tenant", "list"}, "cannot reach the database"},
		{"bad url", map[string]string{"OML_DATABASE_URL": "::not a url"}, []string{"tenant", "list"}, "malformed"},
		{"bad tenant name", good, []string{"tenant", "create", "Bad Name"}, "bad tenant name"},
		{"no args", good, []string{"tenant", "create"}, "exactly one NAME"},
		{"key without --out", good, []string{"key", "generate"}, "--out FILE is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.env, tc.args...)
			require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
			first := strings.SplitN(r.stderr, "\n", 2)[0]
			require.Contains(t, first, tc.want, "the error is on the first line")
		})
	}
}

func TestCLI_TenantCreateBeforeInitSaysRunInit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	key := filepath.Join(t.TempDir(), "k")
	require.Equal(t, cliutil.ExitOK, run(nil, "key", "generate", "--out", key).code)
	r := run(map[string]string{"OML_DATABASE_URL": db.URL, "OML_SIGNING_KEY_FILE": key}, "tenant", "create", "acme")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "oml init")
}

func TestCLI_MigrateStatus(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.Empty())
	env := map[string]string{"OML_DATABASE_URL": db.URL}
	r := run(env, "migrate", "--status")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "pending")
	r = run(env, "migrate")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Applied 001_journal")
	r = run(env, "migrate")
	require.Contains(t, r.stdout, "nothing to apply")
	r = run(env, "migrate", "--status", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code)
	var st struct {
		Latest     int `json:"latest"`
		Migrations []struct {
			Applied bool `json:"applied"`
		} `json:"migrations"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, schema.Latest(), st.Latest)
	for _, m := range st.Migrations {
		require.True(t, m.Applied)
	}
}

// Package clitest is what the command packages' tests share: a deployment
// (migrated database, `oml init` done, named tenants, a key file on disk and
// a file lake) and a way to run the whole oml command line in process
// against it. It is imported only by tests of packages under internal/cli
// (it imports internal/cli itself, so it lives apart from testkit).
package clitest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
)

// Env is one deployment as the command line sees it.
type Env struct {
	URL     string // OML_DATABASE_URL
	Lake    string // OML_LAKE_URL (file://)
	KeyFile string // OML_SIGNING_KEY_FILE
	Pool    *pgxpool.Pool
	Key     *keys.Key
	Tenants map[string]uuid.UUID // by name
}

// New creates the deployment with tenants of the given names.
func New(t *testing.T, names ...string) *Env {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	e := &Env{URL: db.URL, Pool: db.Pool(t), Lake: "file://" + t.TempDir(), Tenants: map[string]uuid.UUID{}}
	var err error
	e.Key, err = keys.Generate()
	require.NoError(t, err)
	e.KeyFile = filepath.Join(t.TempDir(), "deploy.key")
	require.NoError(t, keys.WriteFile(e.KeyFile, e.Key, keys.WriteOptions{}))
	_, err = tenant.Init(ctx, e.Pool, e.Key)
	require.NoError(t, err)
	for _, name := range names {
		tn, _, err := tenant.Create(ctx, e.Pool, e.Key, name)
		require.NoError(t, err)
		e.Tenants[name] = tn.ID
	}
	return e
}

// Vars is the environment pointing oml at the deployment.
func (e *Env) Vars() map[string]string {
	return map[string]string{
		cliutil.EnvDatabaseURL: e.URL, cliutil.EnvLakeURL: e.Lake, cliutil.EnvSigningKeyFile: e.KeyFile,
	}
}

// Run runs `oml args...` in process with vars as the whole environment
// (nil: Vars()) and returns the exit code, stdout and stderr.
func (e *Env) Run(t *testing.T, vars map[string]string, args ...string) (cliutil.ExitCode, string, string) {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	if vars == nil {
		vars = e.Vars()
	}
	code := cli.Run(context.Background(), io, args, func(k string) string { return vars[k] })
	return code, out.String(), errOut.String()
}

package devcmd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml dev env`'s run function without a cluster: shell export lines
// (quoted) or one JSON document, and no running cluster is exit 2.
func TestEnvRun_ExportsOrJSON(t *testing.T) {
	res := envResult{DatabaseURL: "postgres://postgres@/oml?host=/work/my dir/.oml/run&port=5432", LakeURL: "file:///work/my dir/.oml/lake",
		TCPDatabaseURL: "postgres://postgres@127.0.0.1:5432/oml"}
	for _, tc := range []struct {
		name     string
		json     bool
		err      error
		wantCode cliutil.ExitCode
	}{{name: "exports"}, {name: "json", json: true}, {name: "not-running", err: cliutil.ConfigErrorf("no dev cluster is running in /work"), wantCode: cliutil.ExitUsage}} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			opts := &envOptions{IO: s.IO, Format: runtest.Format(tc.json), Options: &Options{Dir: "/work"},
				Running: func(dir string) (envResult, error) {
					require.Equal(t, "/work", dir)
					return res, tc.err
				}}
			runtest.RequireOutput(t, s, envRun(opts), tc.wantCode, "")
		})
	}
}

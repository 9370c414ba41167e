package tenantcmd

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml tenant create`'s run function without a database: a new tenant, an
// existing one (exit 0, nothing changes), golden -o json, and a deployment
// that is not initialised (exit 2, one sentence).
func TestCreateRun_CreatesOrReports(t *testing.T) {
	acme := tenant.Tenant{ID: runtest.Acme, Name: "acme", CreatedAt: runtest.At, ProviderSeq: 2, ProviderHash: "ab12", HeadSeq: 1}
	cases := []struct {
		name     string
		json     bool
		exists   bool
		err      error
		wantCode cliutil.ExitCode
		wantErr  string
	}{
		{name: "created"}, {name: "created-json", json: true}, {name: "exists", exists: true}, {name: "exists-json", json: true, exists: true},
		{name: "not-initialised", err: tenant.ErrNotInitialized, wantCode: cliutil.ExitUsage, wantErr: "run `oml init` first"},
		{name: "refused", err: errors.New("connection reset"), wantCode: cliutil.ExitUsage, wantErr: "create tenant acme: connection reset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			opts := &CreateOptions{IO: s.IO, Format: runtest.Format(tc.json), Name: "acme",
				Key:  func() (*keys.Key, error) { return nil, nil },
				Open: func(context.Context) (*pgxpool.Pool, error) { return nil, nil },
				Create: func(_ context.Context, _ *pgxpool.Pool, _ *keys.Key, name string) (tenant.Tenant, bool, error) {
					require.Equal(t, "acme", name)
					return acme, !tc.exists, tc.err
				}}
			err := createRun(context.Background(), opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			}
			runtest.RequireOutput(t, s, err, tc.wantCode, "")
		})
	}
}

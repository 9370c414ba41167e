package initcmd

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml init`'s run function without a database: the key is loaded before
// anything changes, then migrate, genesis and the pg_monitor grant; what
// each did is printed (the statement an administrator must run on
// stderr), or one JSON document.
func TestRun_MigratesOpensTheChainAndGrants(t *testing.T) {
	k, err := keys.FromSeed(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	cases := []struct {
		name      string
		json      bool
		created   bool
		migrated  bool
		monitor   schema.MonitorGrant
		keyErr    error
		wantSteps []string
		wantCode  cliutil.ExitCode
	}{
		{name: "first", created: true, migrated: true, monitor: schema.MonitorGranted, wantSteps: []string{"migrate", "genesis", "grant"}},
		{name: "first-json", json: true, created: true, migrated: true, monitor: schema.MonitorNeedsAdmin, wantSteps: []string{"migrate", "genesis", "grant"}},
		{name: "again", monitor: schema.MonitorAlready, wantSteps: []string{"migrate", "genesis", "grant"}},
		{name: "needs-admin", created: true, monitor: schema.MonitorNeedsAdmin, wantSteps: []string{"migrate", "genesis", "grant"}},
		{name: "no-key", keyErr: cliutil.ConfigErrorf("no signing key given"), wantCode: cliutil.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(false)
			var steps []string
			opts := &Options{IO: s.IO, Format: runtest.Format(tc.json),
				Key: func() (*keys.Key, error) {
					if tc.keyErr != nil {
						return nil, tc.keyErr
					}
					return k, nil
				},
				Migrate: func(context.Context) ([]schema.Migration, error) {
					steps = append(steps, "migrate")
					if !tc.migrated {
						return nil, nil
					}
					return []schema.Migration{{Version: 1, Name: "init"}}, nil
				},
				Genesis: func(_ context.Context, got *keys.Key) (tenant.InitResult, error) {
					require.Same(t, k, got)
					steps = append(steps, "genesis")
					return tenant.InitResult{KeyID: k.KeyID(), Created: tc.created, ProviderSeq: 1, IssuedAt: runtest.At}, nil
				},
				GrantMonitor: func(context.Context) (schema.MonitorGrant, error) {
					steps = append(steps, "grant")
					return tc.monitor, nil
				}}
			err := run(context.Background(), opts)
			require.Equal(t, tc.wantSteps, steps)
			runtest.RequireStreams(t, s, err, tc.wantCode)
		})
	}
}

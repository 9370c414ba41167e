package devcmd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

// `oml dev load`'s run function without a database: the report (tty on —
// the live line cleared — and off, golden -o json), a re-run continuing
// after the rounds already written, poison rows with their repair, and the
// exits — an interrupted load (1), an uninitialised deployment and a
// failed run (2).
func TestLoadRun_ReportJSONAndExits(t *testing.T) {
	ids := []uuid.UUID{runtest.Acme, runtest.Initech}
	stats := workload.Stats{Events: 250, Appends: 50, Claims: 100, Promoted: 70, Demoted: 5, Erased: 4, Reassigned: 3, SimEnded: 2, ElapsedNano: int64(2 * time.Second)}
	poison := []workload.Poison{
		{Kind: workload.PoisonDigestMismatch, Tenant: runtest.Acme, OutboxSeq: 301, ArtifactID: "art-1-0-0-7", Version: 1},
		{Kind: workload.PoisonMissingBody, Tenant: runtest.Initech, OutboxSeq: 302, ArtifactID: "art-1-1-0-8", Version: 1},
	}
	for _, tc := range []struct {
		name       string
		tty, json  bool
		first      int
		poison     []workload.Poison
		tenantErr  error
		runErr     error
		interrupt  bool
		wantCode   cliutil.ExitCode
		wantStderr string
	}{
		{name: "tty", tty: true, wantStderr: "\r\x1b[K"},
		{name: "no-tty"},
		{name: "json", json: true},
		{name: "continued", first: 3},
		{name: "poison", poison: poison},
		{name: "poison-json", json: true, poison: poison},
		{name: "interrupted", interrupt: true, runErr: context.Canceled, wantCode: cliutil.ExitFindings},
		{name: "not-initialised", tenantErr: tenant.ErrNotInitialized, wantCode: cliutil.ExitUsage},
		{name: "run-error", runErr: fmt.Errorf("append: connection reset"), wantCode: cliutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := &LoadOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenants: 2, Claims: 50, PromoteRatio: 0.7, Seed: 1,
				Open: func(context.Context) (*pgxpool.Pool, *keys.Key, error) { return nil, nil, nil },
				Tenant: func(_ context.Context, _ *pgxpool.Pool, _ *keys.Key, name string) (uuid.UUID, error) {
					i := map[string]int{"load-001": 0, "load-002": 1}[name]
					return ids[i], tc.tenantErr
				},
				NextRound: func(_ context.Context, _ *pgxpool.Pool, got []uuid.UUID, seed uint64) (int, error) {
					require.Equal(t, ids, got)
					require.Equal(t, uint64(1), seed)
					return tc.first, nil
				},
				Run: func(_ context.Context, _ *pgxpool.Pool, _ *keys.Key, cfg workload.Config) (workload.Result, error) {
					require.Equal(t, ids, cfg.Tenants)
					require.Equal(t, tc.first, cfg.FirstRound)
					if tc.interrupt {
						cancel()
					}
					return workload.Result{Stats: stats, Poison: tc.poison}, tc.runErr
				}}
			runtest.RequireOutput(t, s, loadRun(ctx, opts), tc.wantCode, tc.wantStderr)
		})
	}
}

package clitest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/workload"
)

// Workload runs cfg on the chain of the tenant named name (cfg.Tenants is
// set to it) and returns what it appended.
func (e *Env) Workload(t testing.TB, name string, cfg workload.Config) workload.Result {
	t.Helper()
	id, ok := e.Tenants[name]
	require.True(t, ok, "no tenant named %q in the deployment", name)
	cfg.Tenants = []uuid.UUID{id}
	res, err := workload.Run(context.Background(), e.Pool, e.Key, cfg)
	require.NoError(t, err)
	return res
}

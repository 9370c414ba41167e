package schema_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// TestGrantMonitor_ConcurrentInitsOfOneCluster_EveryOneSucceeds: a role
// membership is the cluster's, so `oml init` of two databases of one
// cluster at once both find the lake writer role without pg_monitor and
// both GRANT it; the second GRANT collides with the first's row of
// pg_auth_members (unique_violation) once the first commits. Each must
// report the grant as made or already there, never fail. On a private
// cluster (the rounds revoke the membership, which every database of a
// shared cluster would see): rounds of four sessions, each on its own
// database, released together.
func TestGrantMonitor_ConcurrentInitsOfOneCluster_EveryOneSucceeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := testdb.NewPrimary(t)
	_ = node.CreateDatabase(t, "oml", schema.Migrate) // the job roles exist on the cluster now
	admin, err := pgx.Connect(ctx, node.URL("postgres"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	const sessions = 4
	conns := make([]*pgx.Conn, sessions)
	for i := range conns {
		conns[i], err = pgx.Connect(ctx, node.CreateDatabase(t, "init"+string(rune('a'+i)), nil))
		require.NoError(t, err)
		defer conns[i].Close(ctx)
	}
	for round := range 25 {
		_, err := admin.Exec(ctx, "REVOKE pg_monitor FROM "+schema.LakeWriterRole)
		require.NoError(t, err)
		var start, done sync.WaitGroup
		start.Add(1)
		got := make([]schema.MonitorGrant, sessions)
		errs := make([]error, sessions)
		for i, c := range conns {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				got[i], errs[i] = schema.GrantMonitor(ctx, c)
			}()
		}
		start.Done()
		done.Wait()
		granted := 0
		for i := range conns {
			require.NoError(t, errs[i], "round %d, session %d", round, i)
			require.Contains(t, []schema.MonitorGrant{schema.MonitorGranted, schema.MonitorAlready}, got[i])
			if got[i] == schema.MonitorGranted {
				granted++
			}
		}
		require.GreaterOrEqual(t, granted, 1, "round %d: someone granted it", round)
		ok, err := schema.LakeWriterReadsStandbys(ctx, admin)
		require.NoError(t, err)
		require.True(t, ok, "round %d", round)
	}
}

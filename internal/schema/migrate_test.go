package schema_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

func TestMigrate_FreshDatabaseTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t, testdb.Empty())
	conn := db.Conn(t)

	pending, err := schema.Pending(ctx, conn)
	require.NoError(t, err)
	require.Len(t, pending, schema.Latest())

	applied, err := schema.Apply(ctx, conn)
	require.NoError(t, err)
	require.Len(t, applied, schema.Latest())

	applied, err = schema.Apply(ctx, conn)
	require.NoError(t, err)
	require.Empty(t, applied)
	require.NoError(t, schema.RequireCurrent(ctx, conn))

	st, err := schema.Status(ctx, conn)
	require.NoError(t, err)
	for _, e := range st {
		require.True(t, e.Applied)
		require.False(t, e.AppliedAt.IsZero())
	}
}

func TestMigrate_ConcurrentRunnersAllSucceedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t, testdb.Empty())
	const runners = 6
	conns := make([]*pgx.Conn, runners)
	for i := range conns {
		conns[i] = db.Conn(t)
	}
	var mu sync.Mutex
	total := 0
	var g errgroup.Group
	for i := range runners {
		g.Go(func() error {
			applied, err := schema.Apply(ctx, conns[i])
			mu.Lock()
			total += len(applied)
			mu.Unlock()
			return err
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, schema.Latest(), total, "every migration applied exactly once across the runners")
	var n int
	require.NoError(t, conns[0].QueryRow(ctx, "SELECT count(*) FROM oml.schema_migrations").Scan(&n))
	require.Equal(t, schema.Latest(), n)
}

func TestMigrate_RefusesChangedChecksumAndNewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.New(t).Conn(t)

	_, err := conn.Exec(ctx, "UPDATE oml.schema_migrations SET checksum = 'deadbeef' WHERE version = 1")
	require.NoError(t, err)
	require.ErrorContains(t, schema.Migrate(ctx, conn), "must never change")
	_, err = schema.Pending(ctx, conn)
	require.ErrorContains(t, err, "must never change")

	_, err = conn.Exec(ctx, "UPDATE oml.schema_migrations SET checksum = $1 WHERE version = 1", schema.All()[0].Checksum)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO oml.schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')")
	require.NoError(t, err)
	var ahead *schema.AheadError
	require.ErrorAs(t, schema.Migrate(ctx, conn), &ahead)
	require.Contains(t, ahead.Error(), "upgrade oml")
}

func TestMigrate_PendingOnEmptyDatabaseNeedsNoSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := testdb.New(t, testdb.Empty()).Conn(t)
	err := schema.RequireCurrent(ctx, conn)
	require.ErrorIs(t, err, schema.ErrNotMigrated)
	require.ErrorContains(t, err, "run `oml init` first")
}

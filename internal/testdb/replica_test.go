package testdb_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testdb"
)

func createCounter(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `CREATE TABLE ev (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text)`)
	return err
}

func insertN(t *testing.T, url string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO ev (note) SELECT 'x' FROM generate_series(1, $1)`, n)
	require.NoError(t, err)
}

func maxSeq(t *testing.T, url string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var m int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM ev`).Scan(&m))
	return m
}

// A promoted standby that lost a tail: same system identifier, the next
// timeline, and only the rows it had replayed.
func TestReplica_PromotedStandbyLostTail_KeepsSystemIdentifierNewTimeline(t *testing.T) {
	t.Parallel()
	primary := testdb.NewPrimary(t)
	url := primary.CreateDatabase(t, "app", createCounter)
	insertN(t, url, 10)
	standby := testdb.StartStandby(t, primary)
	before := primary.Identity(t)
	require.Equal(t, int64(1), before.Timeline)
	require.Equal(t, before.SystemIdentifier, standby.Identity(t).SystemIdentifier, "a base backup keeps the system identifier")

	insertN(t, url, 5) // streamed: the standby keeps these
	promoted := testdb.LoseTail(t, primary, standby, func() {
		insertN(t, url, 20) // the lost tail
		require.Equal(t, int64(35), maxSeq(t, url))
	})
	after := promoted.Identity(t)
	require.Equal(t, before.SystemIdentifier, after.SystemIdentifier)
	require.Equal(t, int64(2), after.Timeline, "a promotion starts the next timeline")
	require.Equal(t, int64(15), maxSeq(t, promoted.URL("app")), "the promoted standby has what it replayed, not the lost tail")
	insertN(t, promoted.URL("app"), 1) // it is writable
}

// A point-in-time restore of a base backup: same system identifier, a new
// timeline, behind the primary.
func TestReplica_PointInTimeRestore_BehindSameSystemIdentifier(t *testing.T) {
	t.Parallel()
	primary := testdb.NewPrimary(t)
	url := primary.CreateDatabase(t, "app", createCounter)
	insertN(t, url, 7)
	backup := testdb.TakeBaseBackup(t, primary)
	insertN(t, url, 30)
	restored := backup.Restore(t)
	id := restored.Identity(t)
	require.Equal(t, primary.Identity(t).SystemIdentifier, id.SystemIdentifier)
	require.Equal(t, int64(2), id.Timeline)
	require.Equal(t, int64(7), maxSeq(t, restored.URL("app")))
	require.Equal(t, int64(37), maxSeq(t, url), "the primary goes on meanwhile")
}

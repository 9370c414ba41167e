package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

// A transaction that took its xid after the fence is running while the
// blockers are listed (on a busy system, always): it is not a blocker, and
// it must not break the listing. Found by oml doctor's horizon check: the
// old widening placed such an xid in the previous epoch (a negative xid8 in
// a young cluster, which failed to decode).
func TestBlockers_TransactionNewerThanTheFenceIsNotABlocker(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)

	old, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer old.Rollback(ctx)
	var oldXid uint64
	require.NoError(t, old.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&oldXid))

	f, err := outbox.TakeFence(ctx, pool)
	require.NoError(t, err)

	newer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer newer.Rollback(ctx)
	var newXid uint64
	require.NoError(t, newer.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&newXid))
	require.Greater(t, newXid, f.Xid)

	bl, err := outbox.Blockers(ctx, pool, f.Xid, 50)
	require.NoError(t, err)
	var xids []uint64
	for _, b := range bl {
		xids = append(xids, b.Xid)
		require.Less(t, b.Xid, f.Xid)
	}
	require.Contains(t, xids, oldXid)
	require.NotContains(t, xids, newXid)
}

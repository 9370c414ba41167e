package replication_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/testdb"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestRead_RealStandby_FlushCoversTheInsertPosition_HiddenWithoutPgMonitor:
// a real streaming standby is seen with its flush position, reaches the
// cover position of an idle primary (no wait for ever on a page header),
// and a role without pg_monitor is told so instead of seeing "flushed".
func TestRead_RealStandby_FlushCoversTheInsertPosition_HiddenWithoutPgMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testdb.NewPrimary(t)
	testdb.StartStandby(t, primary)
	su := connect(t, primary.URL("postgres"))
	_, err := su.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 1000)`)
	require.NoError(t, err)

	// A standby that has just started is listed as catching up before it
	// streams: wait for that state (at most a minute), then look.
	var r replication.Reading
	var err2 error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r, err2 = replication.Read(ctx, su); err2 != nil || len(r.Streaming()) > 0 {
			break
		}
	}
	require.NoError(t, err2)
	require.Zero(t, r.Hidden)
	require.Len(t, r.Streaming(), 1)
	s := r.Streaming()[0]
	require.True(t, s.HasFlush)
	require.NotEmpty(t, s.Name)

	lsn, err := outbox.CoverLSN(ctx, su)
	require.NoError(t, err)
	var write replication.LSN
	var w string
	require.NoError(t, su.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&w))
	write, err = replication.ParseLSN(w)
	require.NoError(t, err)
	require.GreaterOrEqual(t, lsn, write, "the insert position is at or past the write position")
	v, err := replication.Wait(ctx, su, replication.DefaultPolicy, lsn, time.Minute, 10*time.Millisecond)
	require.NoError(t, err)
	require.True(t, v.Durable, "the standby flushes up to the cover position: %s", v.Reason)
	require.Len(t, v.Flushed, 1)

	// A role without pg_read_all_stats sees the walsender, not its state.
	_, err = su.Exec(ctx, `CREATE ROLE watcher LOGIN`)
	require.NoError(t, err)
	watcher := connect(t, primary.URL("postgres")+"&user=watcher")
	var who string
	require.NoError(t, watcher.QueryRow(ctx, `SELECT current_user`).Scan(&who))
	require.Equal(t, "watcher", who)
	r, err = replication.Read(ctx, watcher)
	require.NoError(t, err)
	require.Equal(t, 1, r.Hidden)
	require.Empty(t, r.Standbys)
	_, err = replication.Evaluate(replication.DefaultPolicy, lsn, r)
	var hidden *replication.HiddenError
	require.True(t, errors.As(err, &hidden), "a hidden walsender is never taken as flushed")
	require.Contains(t, err.Error(), "GRANT pg_monitor TO watcher")

	_, err = su.Exec(ctx, `GRANT pg_monitor TO watcher`)
	require.NoError(t, err)
	r, err = replication.Read(ctx, watcher)
	require.NoError(t, err)
	require.Zero(t, r.Hidden)
	require.Len(t, r.Streaming(), 1)
}

// BenchmarkDurabilityFence_SingleNode is the fence's cost per batch on a
// single node (no standby): what a cut adds under --durable-on auto (read
// the cover position, read pg_stat_replication, evaluate), next to the
// stable-prefix fence every batch already pays (take a fence, read the
// horizon).
//
//	go test -run '^$' -bench DurabilityFence -benchtime 2000x ./internal/replication/
func BenchmarkDurabilityFence_SingleNode(b *testing.B) {
	ctx := context.Background()
	primary := testdb.NewPrimary(b)
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(b, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE SCHEMA oml; CREATE TABLE oml.outbox (seq bigint GENERATED ALWAYS AS IDENTITY, v int)`)
	require.NoError(b, err)
	b.Run("stable-prefix-fence", func(b *testing.B) {
		for b.Loop() {
			f, err := outbox.TakeFence(ctx, conn)
			require.NoError(b, err)
			_, err = outbox.Horizon(ctx, conn)
			require.NoError(b, err)
			_ = f
		}
	})
	b.Run("durability-fence-auto", func(b *testing.B) {
		for b.Loop() {
			lsn, err := outbox.CoverLSN(ctx, conn)
			require.NoError(b, err)
			r, err := replication.Read(ctx, conn)
			require.NoError(b, err)
			v, err := replication.Evaluate(replication.DefaultPolicy, lsn, r)
			require.NoError(b, err)
			require.True(b, v.Durable)
		}
	})
}

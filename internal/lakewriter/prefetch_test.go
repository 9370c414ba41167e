package lakewriter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/pgdev"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/workload"
)

// The read-ahead fence (prefetch.go): the last batch of a drain is read
// ahead from the primary while the batch before it commits; then the
// primary dies and a standby that never received that batch's rows is
// promoted and written to, before the batch read ahead commits. The check
// before that batch passes (the lake holds only history both share), so
// only the fence stands between the lost rows and the lake: they must be
// dropped and the batch cut and read again from the promoted database —
// and the lake must end exact for the promoted database's history.
func TestPrefetch_PromotedStandbyBetweenReadAheadAndCommit_LostRowsReadAgainNeverCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFailover(t, 1)
	vip, host := f.virtualIP(t)

	// The shared history, then a tail only the primary holds.
	f.load(t, workload.Config{Claims: 10, Seed: 21})
	agreed := f.lastSeq(t)
	testdb.WaitReplayed(t, f.primary, f.standby)
	f.standby.Stop(t, pgdev.Fast)
	f.load(t, workload.Config{Claims: 2, Seed: 22})
	var total, lost int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE seq > $1) FROM oml.outbox`, agreed).Scan(&total, &lost))
	require.Positive(t, lost)
	// Batches of r rows whose last batch holds the whole lost tail, with
	// at least one batch of shared rows before it.
	r := lost
	for last := 0; ; r++ {
		if last = total % r; last == 0 {
			last = r
		}
		if last >= lost && total > last {
			break
		}
	}

	o := f.opts(f.lake)
	o.DB = vip
	o.Limits = lakewriterLimits(r)
	o.Durable = replication.Policy{Mode: replication.ModeNone}
	var dropped atomic.Int32
	o.Log = testLogger(func(msg string) {
		if msg == "dropping the batch read ahead: the database moved since it was read" {
			dropped.Add(1)
		}
	})
	var (
		mu    sync.Mutex
		ahead = map[int64]int64{} // from → to of every batch read ahead
	)
	var promoted *testdb.Node
	o.OnBatch = func(res lakewriter.BatchResult) {
		if promoted != nil || res.End > agreed {
			return
		}
		var to int64
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			to, ok = ahead[res.End]
			return ok
		}, time.Minute, 5*time.Millisecond, "the next batch is read ahead while this one commits")
		if to <= agreed {
			return
		}
		// The batch after this one is read ahead and holds the lost rows:
		// fail over now, before it commits.
		f.primary.Stop(t, pgdev.Immediate)
		f.standby.Start(t)
		f.standby.Promote(t)
		promoted = f.standby
		host.Store(promoted.SocketDir())
		vip.Reset()
		f.pool = testdb.OpenPool(t, promoted.URL("oml"))
		f.Pool = f.pool
		// The application writes on the promoted database (the lost
		// events' journal seqs now hold other events).
		f.load(t, workload.Config{Claims: 3, Seed: 23})
	}
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	d.OnPrefetch(func(from, to int64, err error) {
		if err == nil {
			mu.Lock()
			ahead[from] = to
			mu.Unlock()
		}
	})
	_, err = d.DrainOnce(ctx)
	require.NoError(t, err)
	require.NotNil(t, promoted, "the failover happened between a read ahead and its commit")
	require.Equal(t, int32(1), dropped.Load(), "the batch read ahead was dropped")

	f.drainAll(t, d)
	c, err := lakewriter.CheckLake(ctx, f.pool, f.lake)
	require.NoError(t, err)
	require.True(t, c.OK(), "the lake shares the promoted database's history: %+v", c)
	f.verifyLake(t, f.lake)
}

package lakewriter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/replication"
)

// The loop's queue of final fences: the frontier may advance only to the
// newest fence whose WAL position the standbys hold, oldest first.
func TestPendingFences_PopOnlyTheDurablePrefix(t *testing.T) {
	var p pendingFences
	p.add(durableFence{seq: 10, lsn: 100})
	p.add(durableFence{seq: 10, lsn: 120}) // no new rows: not queued
	p.add(durableFence{seq: 20, lsn: 200})
	p.add(durableFence{seq: 30, lsn: 300})
	require.Len(t, p, 3)
	require.EqualValues(t, 30, p.newest())
	flushed := replication.LSN(250)
	durable := func(l replication.LSN) bool { return l <= flushed }
	require.EqualValues(t, 20, p.pop(durable))
	require.Equal(t, pendingFences{{seq: 30, lsn: 300}}, p)
	require.EqualValues(t, 0, p.pop(durable), "the standby has not reached 300")
	flushed = 300
	require.EqualValues(t, 30, p.pop(durable))
	require.Empty(t, p)
}

func TestPendingFences_FullQueueKeepsTheOldestSteps(t *testing.T) {
	var p pendingFences
	for i := 1; i <= maxPendingFences+5; i++ {
		p.add(durableFence{seq: int64(i), lsn: replication.LSN(i * 10)})
	}
	require.Len(t, p, maxPendingFences)
	require.EqualValues(t, 1, p[0].seq)
	require.EqualValues(t, maxPendingFences+5, p[len(p)-1].seq, "the newest replaces the last entry")
}

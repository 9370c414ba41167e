package delta

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A table many streaming queries write holds more appIds than the slice
// is searched for: past txnIndexAt the index must find every one, and a
// put of a known appId must not add a second entry.
func TestTxnState_PastTheIndexThreshold_EveryAppIDFoundOnce_CheckpointOrderSorted(t *testing.T) {
	var s txnState
	const n = 3*txnIndexAt + 1
	for i := n - 1; i >= 0; i-- {
		e := s.put(fmt.Sprintf("app-%02d", i))
		e.txn.Version = int64(i)
	}
	for i := 0; i < n; i++ {
		e := s.put(fmt.Sprintf("app-%02d", i)) // again: the same entry
		require.Equal(t, int64(i), e.txn.Version)
		e.at = int64(100 + i)
	}
	require.Equal(t, n, s.len())
	for i := 0; i < n; i++ {
		e := s.find(fmt.Sprintf("app-%02d", i))
		require.NotNil(t, e)
		require.Equal(t, int64(i), e.txn.Version)
		require.Equal(t, int64(100+i), e.at)
	}
	require.Nil(t, s.find("app-none"))
	sorted := s.sorted()
	require.Len(t, sorted, n)
	for i, tx := range sorted {
		require.Equal(t, fmt.Sprintf("app-%02d", i), tx.AppID)
	}
}

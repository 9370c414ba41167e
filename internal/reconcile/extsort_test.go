package reconcile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExtSort_SpilledAndInMemoryAgreeWithASort: random records (with
// duplicate keys) come out of the external sort in key order and complete,
// whether they fit in one buffer or are spilled into many runs.
func TestExtSort_SpilledAndInMemoryAgreeWithASort(t *testing.T) {
	t.Parallel()
	for _, runBytes := range []int{64 << 20, 4 << 10, 300} {
		t.Run(fmt.Sprint(runBytes), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(7, uint64(runBytes)))
			s := newExtSort(t.TempDir(), runBytes)
			defer s.close()
			var want [][]byte
			for i := 0; i < 5000; i++ {
				key := silverKey(fmt.Sprintf("art-%d", rng.IntN(1500)), int32(1+rng.IntN(3)))
				val := enc(nil).int(int64(i)).str(fmt.Sprintf("v%d", rng.IntN(10)))
				require.NoError(t, s.add(key, val))
				rec := append([]byte{byte(len(key))}, key...)
				want = append(want, append(rec, val...))
			}
			slices.SortFunc(want, cmpRecords)
			it, err := s.sorted()
			require.NoError(t, err)
			defer it.close()
			var got [][]byte
			for {
				rec, err := it.next()
				require.NoError(t, err)
				if rec == nil {
					break
				}
				got = append(got, bytes.Clone(rec))
			}
			require.Equal(t, want, got)
			if runBytes < 1<<20 {
				require.Greater(t, len(s.runs), 1, "spilled")
			} else {
				require.Empty(t, s.runs)
			}
			require.LessOrEqual(t, s.peak, max(runBytes, 1<<20)+len(s.runs)*(64<<10)+64<<10)
		})
	}
}

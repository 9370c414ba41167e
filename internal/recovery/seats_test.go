package recovery

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

// Two tenants lost their tails together, their outbox rows interleaved.
// Tenant a's unknown row may go anywhere in (290, 300); tenant b's only in
// (294, 296), whose one free seq is 295. Seating a first by the smallest
// free seq above its bound (the restore's rule before seats were chosen
// per round) takes 295 when 291–294 are held, and b has none left.
func TestAssignSeats_TwoTenantsShareAGap_NarrowerGapSeatedFirst(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	held := map[int64]bool{291: true, 292: true, 293: true, 294: true, 296: true}
	taken := func(s int64) bool { return held[s] }
	seats := []seat{{tenant: a, row: 3, lo: 290, hi: 300}, {tenant: b, row: 1, lo: 294, hi: 296}}

	got, err := assignSeats(seats, taken)
	require.NoError(t, err)
	require.Equal(t, int64(295), got[b][1])
	require.Equal(t, int64(297), got[a][3])
}

// The rows of one tenant's gap keep their fold order.
func TestAssignSeats_OneGapManyRows_SeqsRiseInFoldOrder(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	taken := func(s int64) bool { return s == 12 }
	seats := []seat{
		{tenant: a, row: 1, lo: 10, hi: 20}, {tenant: a, row: 2, lo: 10, hi: 20},
		{tenant: b, row: 5, lo: 10, hi: 20}, {tenant: a, row: 3, lo: 10, hi: 20},
	}
	got, err := assignSeats(seats, taken)
	require.NoError(t, err)
	require.Less(t, got[a][1], got[a][2])
	require.Less(t, got[a][2], got[a][3])
	seen := map[int64]bool{}
	for _, rows := range got {
		for _, s := range rows {
			require.False(t, seen[s] || s == 12, "seq %d chosen twice or taken", s)
			seen[s] = true
		}
	}
}

// More rows than free seqs: refused, naming the gap, never a seq outside it.
func TestAssignSeats_GapTooSmall_RefusedWithTheGap(t *testing.T) {
	a := uuid.New()
	seats := []seat{{tenant: a, row: 0, lo: 5, hi: 7}, {tenant: a, row: 1, lo: 5, hi: 7}}
	_, err := assignSeats(seats, func(int64) bool { return false })
	var nse *noSeatError
	require.True(t, errors.As(err, &nse), "%v", err)
	require.Contains(t, err.Error(), "between 5 and 7")
	require.Contains(t, err.Error(), "accept the fork instead")
}

// A gap is bounded by the nearest rows with a seq on either side, pending
// rows (0) and other unseated rows skipped; after the last, by maxTxn+1.
func TestSeatsOf_BoundsSkipPendingAndUnseated(t *testing.T) {
	a := uuid.New()
	seqs := []int64{40, -1, 0, -1, 44, -1}
	got := seatsOf(a, make([]journal.OutboxRow, len(seqs)), seqs, 50)
	require.Len(t, got, 3)
	require.Equal(t, [2]int64{40, 44}, [2]int64{got[0].lo, got[0].hi})
	require.Equal(t, [2]int64{40, 44}, [2]int64{got[1].lo, got[1].hi})
	require.Equal(t, [2]int64{44, 51}, [2]int64{got[2].lo, got[2].hi})
}

package chainverify_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
)

// TestReadJournalHashes_AnswersWhatItReadAndReadsTheRest: the hashes read
// at once answer the seq read for each tenant (another hash there: not
// held; a seq the journal does not hold: not held); a seq not read is
// read from the journal, as JournalContains does.
func TestReadJournalHashes_AnswersWhatItReadAndReadsTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	a, b := d.tenants[0], d.tenants[1]
	hashAt := func(id uuid.UUID, seq int64) []byte {
		h, err := journal.EventHash(ctx, d.pool, id, seq)
		require.NoError(t, err)
		return h
	}
	jh, err := chainverify.ReadJournalHashes(ctx, d.pool, map[uuid.UUID]int64{a: 7, b: 1_000_000})
	require.NoError(t, err)
	contains := func(id uuid.UUID, seq int64, hash []byte) bool {
		in, err := jh.Contains(id)(ctx, seq, hash)
		require.NoError(t, err)
		return in
	}
	require.True(t, contains(a, 7, hashAt(a, 7)))
	require.False(t, contains(a, 7, hashAt(a, 6)), "another hash at the seq read")
	require.False(t, contains(b, 1_000_000, hashAt(b, 1)), "a seq the journal does not hold")
	require.True(t, contains(a, 3, hashAt(a, 3)), "a seq not read is read")
	require.False(t, contains(a, 3, hashAt(a, 4)))
	require.True(t, contains(d.tenants[2], 2, hashAt(d.tenants[2], 2)), "a tenant not read is read")
}

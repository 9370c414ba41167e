package lakewriter

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// TestRegistry_ByteBudget_ClosesLeastRecentlyUsedWriters: with a byte
// budget (--memory) the open writers' estimated snapshot bytes stay within
// it, the least recently used writer is closed first, and the writer in
// use is never closed however large it is.
func TestRegistry_ByteBudget_ClosesLeastRecentlyUsedWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	r := newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1000})
	keys := make([]tables.TableKey, 6)
	var one int64
	for i := range keys {
		keys[i] = tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}
		w, err := r.writer(ctx, keys[i], createMissing)
		require.NoError(t, err)
		one = w.ApproxBytes()
	}
	require.Positive(t, one)
	open, _ := r.stats()
	require.Equal(t, 6, open, "no budget: only --max-open-tables bounds them")

	r = newRegistry(lake, registryOptions{Lean: true, MaxOpen: 1000})
	r.budget = 3*one + one/2 // room for three writers
	for _, k := range keys {
		_, err := r.writer(ctx, k, createMissing)
		require.NoError(t, err)
		require.LessOrEqual(t, r.openBytes(), r.budget)
	}
	open, ev := r.stats()
	require.Equal(t, 3, open)
	require.EqualValues(t, 3, ev)
	for _, k := range keys[:3] {
		_, ok := r.cached(k)
		require.False(t, ok, "the least recently used writers were closed")
	}
	for _, k := range keys[3:] {
		_, ok := r.cached(k)
		require.True(t, ok)
	}

	r.budget = 1 // smaller than any writer: the one in use stays
	_, err := r.writer(ctx, keys[0], createMissing)
	require.NoError(t, err)
	open, _ = r.stats()
	require.Equal(t, 1, open)
	_, ok := r.cached(keys[0])
	require.True(t, ok)
}

package lakewriter

import (
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/tables"
)

// recordKeys is every kind of two tenants and the provider, and a key of a
// kind outside tables.Kinds (kept beside, never lost).
func recordKeys() []tables.TableKey {
	var out []tables.TableKey
	for _, t := range []uuid.UUID{uuid.New(), uuid.New(), journal.ProviderTenant} {
		for _, k := range tables.Kinds {
			out = append(out, tables.TableKey{Tenant: t, Kind: k})
		}
	}
	return append(out, tables.TableKey{Tenant: out[0].Tenant, Kind: "other/kind"}, tables.TableKey{})
}

// TestTableSet_EveryKindRoundTrips_AndRemoveLeavesTheOthers: each key is
// in the set only once added, removing one leaves every other key (of the
// same tenant too), and a tenant with none left has no entry.
func TestTableSet_EveryKindRoundTrips_AndRemoveLeavesTheOthers(t *testing.T) {
	t.Parallel()
	keys := recordKeys()
	var s tableSet
	for i, k := range keys {
		require.False(t, s.has(k), k)
		s.add(k)
		s.add(k) // twice is once
		require.Equal(t, i+1, s.len())
		for j, o := range keys {
			require.Equal(t, j <= i, s.has(o), "after adding %d: %v", i, o)
		}
	}
	for i, k := range keys {
		s.remove(k)
		s.remove(k)
		require.Equal(t, len(keys)-i-1, s.len())
		for j, o := range keys {
			require.Equal(t, j > i, s.has(o), "after removing %d: %v", i, o)
		}
	}
	require.Empty(t, s.bits)
	require.Empty(t, s.other)
	s.remove(keys[0]) // absent: nothing to do
}

// TestTableVersions_UnknownIsNotZero_EveryKindRoundTrips: a table never
// set (or removed) has no value, which is not a value of 0; every kind
// keeps its own value, including 0, -1 and the extremes (math.MinInt64 is
// the slots' "unknown" and is kept beside them, exactly).
func TestTableVersions_UnknownIsNotZero_EveryKindRoundTrips(t *testing.T) {
	t.Parallel()
	keys := recordKeys()
	var m tableVersions
	for _, k := range keys {
		_, ok := m.get(k)
		require.False(t, ok, k)
	}
	values := []int64{0, -1, 1, math.MaxInt64, math.MinInt64, 7, 42} // ends on an even round
	for round, v := range values {
		for i, k := range keys {
			m.set(k, v+int64(i)*int64(round%2)) // odd rounds: a different value per key
		}
		for i, k := range keys {
			got, ok := m.get(k)
			require.True(t, ok, k)
			require.Equal(t, v+int64(i)*int64(round%2), got, "round %d, %v", round, k)
		}
		require.Equal(t, len(keys), m.len())
	}
	// Remove one at a time: the others keep their value.
	for i, k := range keys {
		m.remove(k)
		_, ok := m.get(k)
		require.False(t, ok, "removed %v", k)
		for _, o := range keys[i+1:] {
			got, ok := m.get(o)
			require.True(t, ok, o)
			require.Equal(t, int64(42), got)
		}
	}
	require.Empty(t, m.slots)
	require.Empty(t, m.other)
}

// TestDrainerComplete_ForgetAndReset: markComplete / isComplete /
// forgetComplete / resetComplete over the per-tenant records, with txn
// version 0 distinct from unknown.
func TestDrainerComplete_ForgetAndReset(t *testing.T) {
	t.Parallel()
	d := &Drainer{}
	keys := recordKeys()
	for _, k := range keys {
		require.False(t, d.isComplete(k, 0), "unknown is not complete at 0")
		require.False(t, d.isComplete(k, math.MinInt64), "unknown is not complete at the sentinel")
	}
	for i, k := range keys {
		d.markComplete(k, int64(i))
	}
	for i, k := range keys {
		require.True(t, d.isComplete(k, int64(i)), k)
		require.False(t, d.isComplete(k, int64(i)+1), k)
	}
	d.forgetComplete(keys[0], keys[len(keys)-1])
	require.False(t, d.isComplete(keys[0], 0))
	require.False(t, d.isComplete(keys[len(keys)-1], int64(len(keys)-1)))
	for i, k := range keys[1 : len(keys)-1] {
		require.True(t, d.isComplete(k, int64(i+1)), k)
	}
	d.markComplete(keys[1], math.MinInt64)
	require.True(t, d.isComplete(keys[1], math.MinInt64))
	d.resetComplete()
	for i, k := range keys {
		require.False(t, d.isComplete(k, int64(i)), "after reset: %v", k)
	}
	d.markComplete(keys[2], 7) // usable after a reset
	require.True(t, d.isComplete(keys[2], 7))
}

// TestRegistryAbsent_TakenOnce_ForgetDrops: a table marked absent is taken
// once; forget drops the mark; marks of other kinds of the tenant stay.
func TestRegistryAbsent_TakenOnce_ForgetDrops(t *testing.T) {
	t.Parallel()
	r := newRegistry(nil, registryOptions{})
	keys := recordKeys()
	for _, k := range keys {
		r.markAbsent(k)
	}
	require.True(t, r.takeAbsent(keys[0]))
	require.False(t, r.takeAbsent(keys[0]), "taken once")
	r.forget(keys[1])
	require.False(t, r.takeAbsent(keys[1]), "forgotten")
	for _, k := range keys[2:] {
		require.True(t, r.takeAbsent(k), k)
	}
	require.Zero(t, r.absent.len())
}

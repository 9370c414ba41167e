package lakewriter

import (
	"cmp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/tables"
)

// compareKeys orders table keys exactly as their paths order (what a
// batch's results were sorted by), without building a string.
func TestCompareKeys_OrdersAsThePaths_WithoutAllocating(t *testing.T) {
	var keys []tables.TableKey
	for range 200 {
		id := uuid.New()
		for _, k := range tables.Kinds {
			keys = append(keys, tables.TableKey{Tenant: id, Kind: k})
		}
	}
	keys = append(keys, tables.TableKey{Tenant: uuid.Nil, Kind: tables.Bronze},
		tables.TableKey{Tenant: uuid.Max, Kind: tables.Workareas})
	for _, a := range keys[:100] {
		for _, b := range keys {
			require.Equal(t, cmp.Compare(a.String(), b.String()), compareKeys(a, b), "%s vs %s", a, b)
		}
	}
	a, b := keys[0], keys[5]
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = compareKeys(a, b) }))
}

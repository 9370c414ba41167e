package tables_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// TestTableKey_PathIsTenantThenKindDir: the lake layout is
// <tenant>/<kind dir>, and Store roots a store there.
func TestTableKey_PathIsTenantThenKindDir(t *testing.T) {
	t.Parallel()
	tn := uuid.MustParse("5f0c6c1e-8a43-4d0e-9d0a-2b1f3c4d5e6f")
	for k, dir := range map[tables.Kind]string{tables.Bronze: "bronze/events", tables.Silver: "silver/claims", tables.Gold: "gold/lineage", tables.Workareas: "gold/workareas"} {
		key := tables.TableKey{Tenant: tn, Kind: k}
		require.Equal(t, tn.String()+"/"+dir, key.Path())
		require.Equal(t, key.Path(), key.String())
	}
	lake := store.NewMem()
	st, err := tables.TableKey{Tenant: tn, Kind: tables.Silver}.Store(lake)
	require.NoError(t, err)
	require.NoError(t, st.PutIfAbsent(t.Context(), "x", []byte("1")))
	_, err = lake.Get(t.Context(), tn.String()+"/silver/claims/x")
	require.NoError(t, err)
}

// TestParseTarget_OnlyTheFourOutboxTargets: every Kind is an outbox
// target, in Kinds' fixed order, and nothing else parses.
func TestParseTarget_OnlyTheFourOutboxTargets(t *testing.T) {
	t.Parallel()
	require.Equal(t, []tables.Kind{journal.TargetBronzeEvents, journal.TargetSilverClaims, journal.TargetGoldLineage, journal.TargetGoldWorkareas}, tables.Kinds)
	for _, k := range tables.Kinds {
		got, err := tables.ParseTarget(string(k))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	for _, bad := range []string{"", "bronze", "silver.claim", "gold.lineage "} {
		_, err := tables.ParseTarget(bad)
		require.Error(t, err, bad)
	}
}

// TestBatchBounds_CommitInfoRoundTrip: what the lake writer puts in
// commitInfo reads back equal, under the recorded field names (part of the
// lake format: existing lakes carry them).
func TestBatchBounds_CommitInfoRoundTrip(t *testing.T) {
	t.Parallel()
	rows := int64(7)
	b := tables.BatchBounds{Start: 10, End: 17, CatchUp: true, SystemIdentifier: "7301", Timeline: 2, Rows: &rows,
		Anchor: &tables.Anchor{Seq: 17, Tenant: uuid.New(), JournalSeq: 4, EventHash: "ab", Digest: "cd"}}
	raw, err := json.Marshal(b.CommitInfo())
	require.NoError(t, err)
	got, ok := tables.ParseBatchBounds(raw)
	require.True(t, ok)
	require.Equal(t, b, got)

	var fields map[string]map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.ElementsMatch(t, []string{"start", "end", "catchUp", "systemIdentifier", "timeline", "rows", "anchor"}, keys(fields[tables.CommitInfoKey]))
	require.Equal(t, tables.CommitInfoKey, "omlBatch")

	old, ok := tables.ParseBatchBounds(json.RawMessage(`{"operation":"WRITE","omlBatch":{"start":0,"end":7}}`))
	require.True(t, ok, "a record written before the continuity fields")
	require.Equal(t, tables.BatchBounds{Start: 0, End: 7}, old)
	for _, none := range []string{``, `{"operation":"OPTIMIZE"}`, `not json`} {
		_, ok := tables.ParseBatchBounds(json.RawMessage(none))
		require.False(t, ok, none)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestKind_IndexIsPositionInKinds_AndNumKindsCountsThem: per-tenant
// records index their slots by Kind.Index; every kind round-trips and any
// other kind has no index.
func TestKind_IndexIsPositionInKinds_AndNumKindsCountsThem(t *testing.T) {
	t.Parallel()
	require.Len(t, tables.Kinds, tables.NumKinds)
	for want, k := range tables.Kinds {
		i, ok := k.Index()
		require.True(t, ok, k)
		require.Equal(t, want, i, k)
		require.Equal(t, k, tables.Kinds[i])
	}
	for _, k := range []tables.Kind{"", "bronze", "silver.claims.x"} {
		_, ok := k.Index()
		require.False(t, ok, k)
	}
}

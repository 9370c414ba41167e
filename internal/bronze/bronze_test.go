package bronze_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestReadHead_ReadsOnlyTheFileHoldingTheNewestSeq: bronze written in many
// small batches (many data files); ReadHead returns the journal head and
// opens one data file, the one whose seq statistics reach the newest seq.
// Events from a seq returns that seq onwards, in order, full rows.
func TestReadHead_ReadsOnlyTheFileHoldingTheNewestSeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := store.NewMem()
	d := drainedInBatches(t, lake, 20, 5, 10)
	tn := d.Tenants[0]

	var seq int64
	var hash []byte
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, tn).Scan(&seq, &hash))
	lake.Reset()
	h, ok, err := bronze.ReadHead(ctx, lake, tn)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, seq, h.Seq)
	require.Equal(t, hash, h.Hash)
	require.Empty(t, h.Others)
	opened := map[string]bool{}
	for _, e := range lake.Trace() {
		if strings.HasSuffix(e.Key, ".parquet") {
			opened[e.Key] = true
		}
	}
	require.Len(t, opened, 1, "only the newest file is read: %v", opened)

	evs, err := bronze.Events(ctx, lake, tn, seq-3)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	for i, e := range evs {
		require.Equal(t, seq-3+int64(i), e.Seq)
		require.Len(t, e.Signature, 64)
		require.NotEmpty(t, e.Payload)
		require.Equal(t, tn.String(), e.Tenant)
	}
	// A tenant without a bronze table has no head.
	_, ok, err = bronze.ReadHead(ctx, lake, uuid.New())
	require.NoError(t, err)
	require.False(t, ok)
}

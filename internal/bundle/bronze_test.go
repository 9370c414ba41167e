package bundle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/bundle"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/testkit"
)

func TestBronze_DrainedTenantTable_VerifiesOnItsOwn(t *testing.T) {
	t.Parallel()
	fx := drained(t)
	res, err := bundle.VerifyBronze(context.Background(), fx.lake, fx.tenant, bundle.VerifyOptions{RootKeyID: rootKeyID(t, fx)})
	require.NoError(t, err)
	require.True(t, res.OK(), "findings %+v witnesses %+v", res.Findings, res.Witnesses)
	var head int64
	require.NoError(t, fx.d.Pool.QueryRow(context.Background(), `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, fx.tenant).Scan(&head))
	require.Equal(t, head, res.HeadSeq)
	require.NotEmpty(t, res.Witnesses, "the lake's signed heads are checked against the table")
}

// TestBronze_OneRowEdited_NamesTheRowAndItsFile: one bronze row's payload
// changed (a hand-made commit rewriting the table, as a foreign engine
// would) is a hash-mismatch at that seq, naming the data file.
func TestBronze_OneRowEdited_NamesTheRowAndItsFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := drained(t)
	st, err := bronze.Key(fx.tenant).Store(fx.lake)
	require.NoError(t, err)
	const target = int64(6)
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	schema := snap.Schema()
	col := func(name string) int {
		for i, f := range schema.Fields {
			if f.Name == name {
				return i
			}
		}
		t.Fatalf("bronze has no column %s", name)
		return -1
	}
	seqCol, payloadCol := col("seq"), col("payload")
	edited := false
	add := testkit.RewriteTable(t, st, func(rows []pq.Row) []pq.Row {
		for _, r := range rows {
			if r[seqCol].(int64) == target {
				r[payloadCol] = r[payloadCol].(string) + " "
				edited = true
			}
		}
		return rows
	})
	require.True(t, edited)

	res, err := bundle.VerifyBronze(ctx, fx.lake, fx.tenant, bundle.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, res.OK())
	f := res.Findings[0]
	require.Equal(t, fx.tenant, f.Tenant)
	require.Equal(t, target, f.Seq)
	require.Equal(t, chainverify.ReasonHashMismatch, f.Reason)
	require.Equal(t, add.Path, f.Evidence["file"])
	require.Contains(t, f.Detail, add.Path)
}

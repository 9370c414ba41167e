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
	w, err := delta.OpenWriter(ctx, st, delta.Options{})
	require.NoError(t, err)
	schema := w.Snapshot().Schema()
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
	var rows []pq.Row
	require.NoError(t, w.Snapshot().Scan(ctx, st, delta.ScanOptions{}, func(_ *delta.Add, rs []pq.Row) error {
		rows = append(rows, rs...)
		return nil
	}))
	edited := false
	for _, r := range rows {
		if r[seqCol].(int64) == target {
			r[payloadCol] = r[payloadCol].(string) + " "
			edited = true
		}
	}
	require.True(t, edited)
	var c delta.Commit
	for _, f := range w.Snapshot().Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		rm, err := w.Remove(p)
		require.NoError(t, err)
		c.Removes = append(c.Removes, rm)
	}
	add, err := w.WriteFile(ctx, map[string]*string{}, rows)
	require.NoError(t, err)
	c.Adds, c.Operation = []*delta.Add{add}, "WRITE"
	_, err = w.Commit(ctx, c)
	require.NoError(t, err)

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

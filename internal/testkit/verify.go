package testkit

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
)

// VerifyChains runs the fork check against lake and then chain verify on
// pool in full, with the lake's witnesses and bronze heads as anchors and
// the accepted forks excused, as `oml chain verify --lake` does. It
// returns both results for the test to judge.
func VerifyChains(t testing.TB, pool *pgxpool.Pool, lake store.Store) (*chainverify.ForkCheckResult, chainverify.Report) {
	t.Helper()
	ctx := context.Background()
	fc, err := chainverify.ForkCheck(ctx, pool, lake, nil)
	require.NoError(t, err)
	acc, err := chainverify.ReadAcceptances(ctx, pool)
	require.NoError(t, err)
	rep, err := chainverify.VerifyDB(ctx, pool, chainverify.DBOptions{
		Full: true,
		Witnessed: func(id uuid.UUID) (chainverify.Head, bool) {
			w, ok := fc.Witnessed[id]
			if !ok {
				return chainverify.Head{}, false
			}
			return chainverify.Head{Seq: w.Seq, Hash: w.HashBytes()}, true
		},
		Bronze: func(id uuid.UUID) (chainverify.Head, bool) {
			b, ok := fc.Bronze[id]
			return chainverify.Head{Seq: b.Seq, Hash: b.Hash}, ok
		},
		Accepted: func(id uuid.UUID, a chainverify.Head) bool { _, ok := acc.Covers(id, a); return ok },
	})
	require.NoError(t, err)
	return fc, rep
}

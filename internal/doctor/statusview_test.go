package doctor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lakewriter"
)

// oml status reads the lake through the summary doctor stores
// (ReadLakeView); what it reports must be what ForkCheck and CheckLake,
// reading every table, report — also for tables that changed after the
// summary was stored.
func TestReadLakeView_MatchesTheFullReadsAfterMoreWasDrained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	b.load(t, 5, 0, 31)
	b.drain(t, nil)
	b.witnessAll(t)
	requireStatus(t, b.doctor(t, nil), doctor.IDDelta, doctor.StatusOK) // stores the summary
	b.load(t, 5, 0, 32)
	b.drain(t, nil)
	b.witnessAll(t)

	view, err := doctor.ReadLakeView(ctx, b.pool, b.lake)
	require.NoError(t, err)
	fc, err := chainverify.ForkCheck(ctx, b.pool, b.lake, nil)
	require.NoError(t, err)
	c, err := lakewriter.CheckLake(ctx, b.pool, b.lake)
	require.NoError(t, err)
	require.Equal(t, fc.Bronze, view.Fork.Bronze)
	require.Equal(t, fc.Witnessed, view.Fork.Witnessed)
	require.Equal(t, fc.Findings, view.Fork.Findings)
	require.Equal(t, c, view.Continuity)
	require.Equal(t, b.lastSeq(t), view.Continuity.LakePosition)
}

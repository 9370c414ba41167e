package lakecmd_test

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit/clitest"
)

// TestDrain_DefaultMemory_RuntimeCollectsAtTheBudgetsSoftLimit: a real
// `oml lake drain --once` hands the default --memory to the Go runtime it
// runs in: a soft limit of three quarters of it, and no proportional
// collector under it (GOGC off), so the heap is collected at the limit and
// peak RSS is the budget's whatever the number of tables
// (docs/lake-writer.md, "A heap sized by the budget"). Not parallel: it
// reads the process's runtime settings, which every in-process drain sets,
// and puts back the runtime's defaults when done.
func TestDrain_DefaultMemory_RuntimeCollectsAtTheBudgetsSoftLimit(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set in this test's environment, and the drain leaves the runtime to it")
	}
	reset := func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}
	reset()
	t.Cleanup(reset)
	e := clitest.New(t, "acme")
	code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Equal(t, lakewriter.SoftLimit(lakewriter.DefaultMemory), debug.SetMemoryLimit(-1), "the soft limit (a negative limit only reads it)")
	require.Equal(t, -1, debug.SetGCPercent(-1), "the proportional collector is off under the limit")
}

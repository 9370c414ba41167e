package lakecmd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
)

// TestSoftMemoryLimit_ThreeQuartersOfTheBudget_EnvironmentWins_ZeroSetsNone:
// the runtime's soft limit is lakewriter.SoftLimit of --memory (192 MiB of
// the default 256), never the whole budget (the binary's code and what the
// limit does not count sit on top of it); an operator's GOMEMLIMIT is left
// alone, and --memory 0 sets no limit.
func TestSoftMemoryLimit_ThreeQuartersOfTheBudget_EnvironmentWins_ZeroSetsNone(t *testing.T) {
	t.Parallel()
	run := func(budget int64, env string) (set []int64) {
		softMemoryLimit(budget, func(k string) string {
			if k == "GOMEMLIMIT" {
				return env
			}
			return ""
		}, func(n int64) int64 { set = append(set, n); return 0 })
		return set
	}
	require.Equal(t, []int64{192 << 20}, run(lakewriter.DefaultMemory, ""))
	require.Equal(t, []int64{768 << 20}, run(1<<30, ""))
	require.Empty(t, run(lakewriter.DefaultMemory, "1GiB"), "GOMEMLIMIT in the environment wins")
	require.Empty(t, run(0, ""), "--memory 0: no limit")
}

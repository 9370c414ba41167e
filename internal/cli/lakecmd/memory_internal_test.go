package lakecmd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lakewriter"
)

// TestMemoryBudget_LimitIsThreeQuarters_HeapCollectedAtIt_EnvironmentWins_ZeroSetsNone:
// the runtime's soft limit is lakewriter.SoftLimit of --memory (192 MiB of
// the default 256), never the whole budget (the binary's code and what the
// limit does not count sit on top of it), and the proportional collector
// is off under it, so the heap is collected at the limit, not at twice the
// live heap; an operator's GOMEMLIMIT leaves both to the runtime, a GOGC
// leaves the collector's pace to it, and --memory 0 sets neither.
func TestMemoryBudget_LimitIsThreeQuarters_HeapCollectedAtIt_EnvironmentWins_ZeroSetsNone(t *testing.T) {
	t.Parallel()
	type set struct {
		limits   []int64
		percents []int
	}
	run := func(budget int64, env map[string]string) (s set) {
		applyMemoryBudget(budget, func(k string) string { return env[k] }, runtimeKnobs{
			limit:   func(n int64) int64 { s.limits = append(s.limits, n); return 0 },
			percent: func(p int) int { s.percents = append(s.percents, p); return 100 },
		})
		return s
	}
	require.Equal(t, set{limits: []int64{192 << 20}, percents: []int{-1}}, run(lakewriter.DefaultMemory, nil))
	require.Equal(t, set{limits: []int64{768 << 20}, percents: []int{-1}}, run(1<<30, nil))
	require.Equal(t, set{}, run(lakewriter.DefaultMemory, map[string]string{"GOMEMLIMIT": "1GiB"}), "GOMEMLIMIT in the environment wins")
	require.Equal(t, set{}, run(lakewriter.DefaultMemory, map[string]string{"GOMEMLIMIT": "1GiB", "GOGC": "off"}), "GOMEMLIMIT in the environment wins")
	require.Equal(t, set{limits: []int64{192 << 20}}, run(lakewriter.DefaultMemory, map[string]string{"GOGC": "50"}), "GOGC in the environment sets the collector's pace")
	require.Equal(t, set{}, run(0, nil), "--memory 0: no limit, and the collector left at GOGC")
}

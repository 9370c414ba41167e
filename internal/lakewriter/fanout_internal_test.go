package lakewriter

import (
	"testing"
	"time"
)

// TestCutDue_ManyTablesFewRowsWaitsUpToTheLagTarget: after --max-wait a
// batch with at least fanoutRowsPerTable rows per table is cut; one that
// would be about a row per table waits for more, but never beyond
// fanoutWaitFactor × --max-wait.
func TestCutDue_ManyTablesFewRowsWaitsUpToTheLagTarget(t *testing.T) {
	t.Parallel()
	mw := time.Second
	for _, c := range []struct {
		name      string
		n, tables int
		age       time.Duration
		want      bool
	}{
		{"few tables, full enough", 500, 10, mw, true},
		{"exactly two rows a table", 4000, 2000, mw, true},
		{"a row a table waits", 2000, 2000, mw, false},
		{"still waiting", 5000, 4000, 3 * mw, false},
		{"the lag target cuts it", 5000, 4000, fanoutWaitFactor * mw, true},
		{"no tables (only gaps)", 0, 0, mw, true},
	} {
		if got := cutDue(c.n, c.tables, c.age, mw); got != c.want {
			t.Errorf("%s: cutDue(%d rows, %d tables, %s) = %v, want %v", c.name, c.n, c.tables, c.age, got, c.want)
		}
	}
}

package lakewriter

import (
	"errors"
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

// TestWaitedSince_RowsWrittenWhileTheLastBatchCommitted_CountFromTheirWrite:
// a pending batch whose oldest row is 1.5 s old has waited 1.5 s (so with
// --max-wait 1s it is due at once); an unknown or non-positive age counts
// from now.
func TestWaitedSince_RowsWrittenWhileTheLastBatchCommitted_CountFromTheirWrite(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	if got := waitedSince(now, 1.5, nil); !got.Equal(now.Add(-1500 * time.Millisecond)) {
		t.Errorf("waitedSince(1.5 s old) = %v, want 1.5 s before now", now.Sub(got))
	}
	if got := now.Sub(waitedSince(now, 1.5, nil)); got < time.Second {
		t.Errorf("a batch whose oldest row is 1.5 s old has waited %v, less than --max-wait 1s", got)
	}
	for _, c := range []struct {
		name string
		age  float64
		err  error
	}{{"probe failed", 3, errors.New("down")}, {"no row yet", 0, nil}, {"clock step", -0.2, nil}} {
		if got := waitedSince(now, c.age, c.err); !got.Equal(now) {
			t.Errorf("%s: waitedSince = %v before now, want now", c.name, now.Sub(got))
		}
	}
}

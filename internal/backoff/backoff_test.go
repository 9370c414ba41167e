package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelay_DoublesFromMinAndStopsAtMax(t *testing.T) {
	t.Parallel()
	p := Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	want := []time.Duration{50, 100, 200, 400, 800, 1600, 2000, 2000}
	for i, w := range want {
		require.Equal(t, w*time.Millisecond, p.Delay(i), "attempt %d", i)
	}
	require.Equal(t, 2*time.Second, p.Delay(1000), "a huge attempt must not overflow past the cap")
}

func TestDelay_JitterStaysInsideItsRange(t *testing.T) {
	t.Parallel()
	half := Policy{Min: 200 * time.Millisecond, Max: 30 * time.Second, Jitter: Half}
	full := Policy{Min: 50 * time.Millisecond, Max: 5 * time.Second, Jitter: Full}
	for attempt := range 12 {
		d := Policy{Min: half.Min, Max: half.Max}.Delay(attempt)
		for range 200 {
			got := half.Delay(attempt)
			require.GreaterOrEqual(t, got, d/2)
			require.LessOrEqual(t, got, d)
		}
		d = Policy{Min: full.Min, Max: full.Max}.Delay(attempt)
		for range 200 {
			got := full.Delay(attempt)
			require.GreaterOrEqual(t, got, time.Millisecond)
			require.Less(t, got, d+time.Millisecond)
		}
	}
}

func TestSleep_EndedContext_ReturnsItsError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}

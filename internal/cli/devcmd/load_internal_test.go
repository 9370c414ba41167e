package devcmd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/workload"
)

func TestLoadProgressLine_ShowsTotalAndETA(t *testing.T) {
	t.Parallel()
	s := workload.Stats{Claims: 100, Events: 250}
	line := progressLine(s, 10*time.Second, 400, 0)
	require.Contains(t, line, "100/400 claims (25%)")
	require.Contains(t, line, "ETA 30s")
	line = progressLine(s, 10*time.Second, 400, time.Minute)
	require.Contains(t, line, "10s of 1m0s")
}

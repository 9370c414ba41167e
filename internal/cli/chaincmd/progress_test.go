package chaincmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "verifying [===============>              ]  50% 500/1000 events, 100/s, ETA 5s",
		progressLine(500, 1000, 5*time.Second))
	require.Equal(t, "verifying 1200 events, 240/s", progressLine(1200, 1000, 5*time.Second))
	require.Equal(t, "verifying 7 events, 7/s", progressLine(7, 0, time.Second))
}

func TestStartProgress_ErasesItsLineOnStop(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer // written by the bar's goroutine; read after stop waited for it
	var p chainverify.Progress
	p.Events.Store(10)
	stop := startProgress(&buf, &p, func() int64 { return 20 })
	stop()
	require.True(t, strings.HasSuffix(buf.String(), "\r\x1b[K"))
}

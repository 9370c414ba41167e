package chaincmd

import (
	"fmt"
	"io"
	"time"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
)

// startProgress draws a one-line progress bar on w (a terminal) until the
// returned stop is called, which erases it. total may be 0 (unknown).
func startProgress(w io.Writer, p *chainverify.Progress, total func() int64) (stop func()) {
	return cliutil.LiveLine(w, func(elapsed time.Duration) string {
		return progressLine(p.Events.Load(), total(), elapsed)
	})
}

// progressLine renders "verifying [=====>    ]  42% 1234/2900 events, 51234/s, ETA 3s".
func progressLine(n, total int64, elapsed time.Duration) string {
	rate := float64(n) / max(elapsed.Seconds(), 1e-3)
	if total <= 0 || n > total {
		return fmt.Sprintf("verifying %d events, %.0f/s", n, rate)
	}
	const width = 30
	filled := int(float64(width) * float64(n) / float64(total))
	bar := make([]byte, width)
	for i := range bar {
		switch {
		case i < filled:
			bar[i] = '='
		case i == filled:
			bar[i] = '>'
		default:
			bar[i] = ' '
		}
	}
	eta := "-"
	if rate > 0 {
		eta = time.Duration(float64(total-n) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return fmt.Sprintf("verifying [%s] %3d%% %d/%d events, %.0f/s, ETA %s", bar, 100*n/total, n, total, rate, eta)
}

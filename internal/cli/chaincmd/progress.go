package chaincmd

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/omlhq/oml/internal/chainverify"
)

// startProgress draws a one-line progress bar on w (a terminal) until the
// returned stop is called, which erases it. total may be 0 (unknown).
func startProgress(w io.Writer, p *chainverify.Progress, total func() int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-t.C:
				fmt.Fprint(w, "\r\x1b[K"+progressLine(p.Events.Load(), total(), time.Since(start)))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
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

package cliutil

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// LiveLine redraws one status line on w (a terminal: progress bars go to
// stderr) every 200ms with what line returns for the time elapsed, until
// the returned stop is called, which erases it. Callers decide whether w is
// a terminal; on anything else they should not draw at all.
func LiveLine(w io.Writer, line func(elapsed time.Duration) string) (stop func()) {
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
				fmt.Fprint(w, "\r\x1b[K"+line(time.Since(start)))
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

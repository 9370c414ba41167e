package cliutil

import (
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/term"
)

// LiveLine redraws one status line on w (a terminal: progress bars go to
// stderr) every 200ms with what line returns for the time elapsed, until
// the returned stop is called, which erases it. Callers decide whether w is
// a terminal; on anything else they should not draw at all.
//
// Every redraw is cut to the terminal's width (FitLine, read again on each
// redraw so a resized window is followed): a line wider than the terminal
// wraps, and "\r" then returns only to the start of its last row, so the
// redraws would pile up instead of replacing each other.
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
				fmt.Fprint(w, "\r\x1b[K"+FitLine(line(time.Since(start)), writerWidth(w)))
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// writerWidth is the width of the terminal behind w, or 80 when w is not
// a terminal (or its size cannot be read).
func writerWidth(w io.Writer) int {
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	return 80
}

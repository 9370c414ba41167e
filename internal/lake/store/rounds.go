package store

import (
	"context"
	"sync"
)

// roundQueue is group commit for one flush (a syncfs of the lake's
// filesystem in group mode, groupsync.go; an fsync of one directory per
// file, dirsync.go). A caller needs a round that started after its own
// step (a file written, a name published, a directory created): a round
// already running when it asks may have passed that step, so it does not
// count. At most one round runs; callers that ask meanwhile join the
// pending one, and when the running round ends the first of them runs the
// pending one for all. No goroutine of its own: rounds run on the callers'
// goroutines, and every caller of a round gets its result.
type roundQueue struct {
	running *syncRound // the round in progress, nil when none
	pending *syncRound // the round the next arrivals join; run when none runs
}

type syncRound struct {
	done    chan struct{} // closed when the round has finished
	err     error         // set before done is closed
	waiters int           // callers that joined it (tests wait for arrivals)
}

// await returns once a round that started after the call began has
// finished, with its error, or when ctx ends (the round may still run;
// the caller's step is then not known durable). mu guards q: it is held
// on entry and released on return. The caller that starts a round runs
// it with run, given how many callers the round serves; ended, when set, is called with mu held after each round
// this caller ran has finished, before its waiters see the result.
func (q *roundQueue) await(ctx context.Context, mu *sync.Mutex, run func(waiters int) error, ended func()) error {
	if q.pending == nil {
		q.pending = &syncRound{done: make(chan struct{})}
	}
	r := q.pending
	r.waiters++
	for {
		switch {
		case q.running == r: // another caller runs it
			mu.Unlock()
			return waitRound(ctx, r)
		case q.pending != r: // it ran and finished while we were away
			mu.Unlock()
			return r.err
		case q.running == nil:
			q.running, q.pending = r, nil
			mu.Unlock()
			err := run(r.waiters) // nobody joins a running round
			mu.Lock()
			r.err = err
			q.running = nil
			if ended != nil {
				ended()
			}
			close(r.done)
			mu.Unlock()
			return err
		}
		// An earlier round runs: it may have started before our step
		// finished, so it does not count; wait for it to end.
		earlier := q.running
		mu.Unlock()
		if err := waitRound(ctx, earlier); err != nil && ctx.Err() != nil {
			return err
		}
		mu.Lock()
	}
}

// waitRound waits for r to finish and returns its error, or ctx's.
func waitRound(ctx context.Context, r *syncRound) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

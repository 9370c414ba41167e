package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter says how a delay is randomised.
type Jitter int

const (
	// None waits exactly the exponential delay.
	None Jitter = iota
	// Half waits uniformly in [d/2, d]: retries spread out, and never
	// come much sooner than the policy says.
	Half
	// Full waits uniformly in [0, d), plus a millisecond so a retry never
	// spins.
	Full
)

// maxShift bounds the doubling so Min<<attempt cannot overflow.
const maxShift = 30

// Policy is an exponential backoff: Min doubled per attempt (attempt 0
// waits Min), capped at Max, randomised by Jitter.
type Policy struct {
	Min, Max time.Duration
	Jitter   Jitter
}

// Delay is how long to wait before retry number attempt (from 0).
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Min << min(max(attempt, 0), maxShift)
	if d <= 0 || d > p.Max {
		d = p.Max
	}
	switch p.Jitter {
	case Half:
		return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	case Full:
		return time.Duration(rand.Int64N(max(int64(d), 1))) + time.Millisecond
	}
	return d
}

// Wait sleeps Delay(attempt), or returns ctx's error when it ends first.
func (p Policy) Wait(ctx context.Context, attempt int) error {
	return Sleep(ctx, p.Delay(attempt))
}

// Sleep waits d, or returns ctx's error when it ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

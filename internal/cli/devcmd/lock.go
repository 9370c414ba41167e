package devcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockFile serialises `dev up` and `dev down` on one .oml/: two concurrent
// `dev up` would otherwise both run initdb on the same directory.
const lockFile = "dev.lock"

// lockOptions say what lockRoot does when .oml/ is missing.
type lockOptions struct {
	// Create makes .oml/ (`dev up`); without it a missing .oml/ yields a
	// no-op unlock and no error (`dev down`: nothing to guard).
	Create bool
}

// lockRoot takes an exclusive flock on .oml/dev.lock, waiting for another oml
// holding it (until ctx ends).
func lockRoot(ctx context.Context, l layout, opts lockOptions) (unlock func(), err error) {
	create := opts.Create
	if create {
		if err := os.MkdirAll(l.Root, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", l.Root, err)
		}
	}
	p := filepath.Join(l.Root, lockFile)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		if !create && errors.Is(err, os.ErrNotExist) {
			return func() {}, nil
		}
		return nil, fmt.Errorf("cannot open the lock file %s: %w", p, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("cannot lock %s: %w", p, err)
		}
		// Another oml dev up/down holds it; they finish in seconds.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("gave up waiting for another oml dev command holding %s: %w", p, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() { f.Close() }, nil
}

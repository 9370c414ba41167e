package keys

import (
	"fmt"
	"sync"
	"time"
)

// Reloading is a key file that a long-running process re-reads when it
// changes (a new modification time, size or inode), so the lake writer
// picks up a rotated key without a restart. Callers take Current() once
// per signed thing and use that key for both its id and its signature: a
// reload between the two would otherwise pair one key's id with another
// key's signature.
type Reloading struct {
	path  string
	every time.Duration

	mu        sync.Mutex
	cur       *Key
	stamp     fileStamp
	checkedAt time.Time
	lastErr   error
}

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// DefaultReloadCheck is how often Reloading looks at its file.
const DefaultReloadCheck = 5 * time.Second

// OpenReloading loads path (with LoadFile's checks) and returns it as a
// Reloading key that looks at the file at most every every (0: the
// default).
func OpenReloading(path string, every time.Duration) (*Reloading, error) {
	if every <= 0 {
		every = DefaultReloadCheck
	}
	k, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	st, err := stampOf(path)
	if err != nil {
		return nil, err
	}
	return &Reloading{path: path, every: every, cur: k, stamp: st, checkedAt: time.Now()}, nil
}

// Current returns the key as of now: the file is re-read when it changed
// since the last look. A file that changed into something unusable (a bad
// mode, not a key) keeps the previous key, and Err says why.
func (r *Reloading) Current() *Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checkedAt) < r.every {
		return r.cur
	}
	r.checkedAt = time.Now()
	st, err := stampOf(r.path)
	if err != nil {
		r.lastErr = err
		return r.cur
	}
	if st == r.stamp {
		return r.cur
	}
	k, err := LoadFile(r.path)
	if err != nil {
		r.lastErr = fmt.Errorf("the changed key file %s was not loaded (still signing with %s): %w", r.path, r.cur.KeyID(), err)
		return r.cur
	}
	r.cur, r.stamp, r.lastErr = k, st, nil
	return r.cur
}

// Err is why the last reload failed (nil after a good one).
func (r *Reloading) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// KeyID is Current().KeyID(); see the type's note on pairing it with Sign.
func (r *Reloading) KeyID() string { return r.Current().KeyID() }

// Sign signs with the key Current() returned last (it does not reload).
func (r *Reloading) Sign(msg []byte) []byte {
	r.mu.Lock()
	k := r.cur
	r.mu.Unlock()
	return k.Sign(msg)
}

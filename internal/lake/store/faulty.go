package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"time"
)

// ErrInjected is the error the fault injector returns (wrapped).
var ErrInjected = errors.New("injected fault")

// FaultKind is what an injected fault does.
type FaultKind int

const (
	// FaultError fails the operation with ErrInjected (or Rule.Err); a write
	// is not applied.
	FaultError FaultKind = iota
	// FaultTransient fails one attempt the way a throttled or 5xx request
	// fails; as a real backend would, the wrapper retries the operation
	// itself (the failed attempts show in the trace). If the rule fires for
	// maxTransientAttempts attempts in a row the operation gives up with an
	// error wrapping ErrInjected, as a backend gives up when its attempts run
	// out.
	FaultTransient
	// FaultDelay waits Rule.Delay before running the operation. If the
	// context ends first the operation fails with the context's error and a
	// write is not applied.
	FaultDelay
	// FaultTimeout makes the operation hang until its context ends (or
	// Rule.Delay passes, if set) and then fail without being applied: a read
	// fails with a timeout error, a write with ErrAmbiguous, since the
	// caller of a real store could not know whether it landed.
	FaultTimeout
	// FaultAmbiguous runs a write against the inner store and then reports
	// ErrAmbiguous anyway: the write landed (unless it failed on its own,
	// e.g. put-if-absent on an existing key), but the caller is told the
	// outcome is unknown, as after a timeout that struck after the request
	// reached the server. On a read it behaves like FaultError.
	FaultAmbiguous
)

var faultNames = [...]string{"error", "transient", "delay", "timeout", "ambiguous"}

func (k FaultKind) String() string {
	if k < 0 || int(k) >= len(faultNames) {
		return "fault?"
	}
	return faultNames[k]
}

// maxTransientAttempts bounds how many transient faults in a row one
// operation absorbs before giving up (a real backend's retry budget).
const maxTransientAttempts = 5

// Rule selects operations and the fault injected into them. A call matches
// when its op is in Ops (all ops if empty), its key matches the Key glob
// (path.Match syntax, where '*' does not cross '/'; all keys if empty; for
// List the prefix is matched; use Match for anything else) and
// Match (if set) returns true. Of the matching calls, the first After are let
// through; the next Times (every one if 0) get the fault.
//
// OpRead (a ReadAt on an object returned by Open) is matched only by rules
// that list it in Ops: objects opened while such a rule is installed have
// their reads checked against the rules and recorded in the trace; other
// objects' reads are neither, so traces of write paths stay unchanged. A
// read fault of kind FaultError, FaultAmbiguous or FaultTimeout fails that
// ReadAt; FaultTransient and FaultDelay behave as for other ops.
type Rule struct {
	Ops   []OpKind
	Key   string
	Match func(op OpKind, key string) bool
	After int
	Times int
	Kind  FaultKind
	Delay time.Duration
	Err   error
}

func (r *Rule) matches(op OpKind, key string) bool {
	if len(r.Ops) == 0 && op == OpRead {
		return false // reads of opened objects only when named
	}
	if len(r.Ops) > 0 && !slices.Contains(r.Ops, op) {
		return false
	}
	if r.Key != "" {
		if ok, err := path.Match(r.Key, key); err != nil || !ok {
			return false
		}
	}
	return r.Match == nil || r.Match(op, key)
}

// Faulty wraps a Store and injects faults by rule, recording every operation
// (including each failed transient attempt) in its trace. With no rules it is
// a transparent pass-through.
type Faulty struct {
	Recorder

	inner Store
	mu    sync.Mutex
	rules []Rule
	seen  []int // matching calls seen per rule
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner with the given rules.
func NewFaulty(inner Store, rules ...Rule) *Faulty {
	f := &Faulty{inner: inner}
	f.SetRules(rules...)
	return f
}

// SetRules replaces the rules and resets their call counters.
func (f *Faulty) SetRules(rules ...Rule) {
	f.mu.Lock()
	f.rules = append([]Rule(nil), rules...)
	f.seen = make([]int, len(rules))
	f.mu.Unlock()
}

// Inner returns the wrapped store.
func (f *Faulty) Inner() Store { return f.inner }

func (f *Faulty) String() string { return f.inner.String() }

// fault returns the rule that fires for this call, if any. Every matching
// rule counts the call, so call indexes are independent of rule order.
func (f *Faulty) fault(op OpKind, key string) *Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	var fired *Rule
	for i := range f.rules {
		r := &f.rules[i]
		if !r.matches(op, key) {
			continue
		}
		n := f.seen[i]
		f.seen[i]++
		if fired == nil && n >= r.After && (r.Times == 0 || n < r.After+r.Times) {
			fired = r
		}
	}
	return fired
}

func injectedErr(r *Rule, op OpKind, key string) error {
	if r.Err != nil {
		return fmt.Errorf("%s %q: %w: %w", op, key, ErrInjected, r.Err)
	}
	return fmt.Errorf("%s %q: %w (%s)", op, key, ErrInjected, r.Kind)
}

// do runs one operation through the rules. run performs it on the inner store.
func (f *Faulty) do(ctx context.Context, op OpKind, key string, run func() error) error {
	for attempt := 1; ; attempt++ {
		r := f.fault(op, key)
		if r == nil {
			err := run()
			f.Record(op, key, OutcomeOf(err))
			return err
		}
		switch r.Kind {
		case FaultTransient:
			f.Record(op, key, "injected-transient")
			if attempt >= maxTransientAttempts {
				return fmt.Errorf("%s %q: gave up after %d attempts: %w", op, key, attempt, ErrInjected)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		case FaultDelay:
			t := time.NewTimer(r.Delay)
			select {
			case <-ctx.Done():
				t.Stop()
				f.Record(op, key, "injected-delay-canceled")
				return ctx.Err()
			case <-t.C:
			}
			err := run()
			f.Record(op, key, "injected-delay-"+OutcomeOf(err))
			return err
		case FaultTimeout:
			var tc <-chan time.Time
			if r.Delay > 0 {
				t := time.NewTimer(r.Delay)
				defer t.Stop()
				tc = t.C
			}
			select {
			case <-ctx.Done():
			case <-tc:
			}
			f.Record(op, key, "injected-timeout")
			if op.IsWrite() {
				return fmt.Errorf("%s %q: timed out: %w: %w", op, key, ErrAmbiguous, ErrInjected)
			}
			return fmt.Errorf("%s %q: timed out: %w: %w", op, key, ErrInjected, context.DeadlineExceeded)
		case FaultAmbiguous:
			if !op.IsWrite() {
				f.Record(op, key, "injected-error")
				return injectedErr(r, op, key)
			}
			err := run()
			f.Record(op, key, "injected-ambiguous-"+OutcomeOf(err))
			return fmt.Errorf("%s %q: reported as timed out after the write was sent: %w: %w", op, key, ErrAmbiguous, ErrInjected)
		default:
			f.Record(op, key, "injected-error")
			return injectedErr(r, op, key)
		}
	}
}

func (f *Faulty) Get(ctx context.Context, key string) (data []byte, err error) {
	err = f.do(ctx, OpGet, key, func() (err error) {
		data, err = f.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

func (f *Faulty) Open(ctx context.Context, key string) (obj Object, err error) {
	err = f.do(ctx, OpOpen, key, func() (err error) {
		obj, err = f.inner.Open(ctx, key)
		return err
	})
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		return nil, err
	}
	if f.hasReadRule() {
		return &faultyObject{Object: obj, f: f, ctx: ctx, key: key}, nil
	}
	return obj, nil
}

func (f *Faulty) hasReadRule() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if slices.Contains(r.Ops, OpRead) {
			return true
		}
	}
	return false
}

// faultyObject routes ReadAt through the rules as OpRead.
type faultyObject struct {
	Object
	f   *Faulty
	ctx context.Context
	key string
}

func (o *faultyObject) ReadAt(p []byte, off int64) (n int, err error) {
	err = o.f.do(o.ctx, OpRead, o.key, func() (err error) {
		n, err = o.Object.ReadAt(p, off)
		if err == io.EOF {
			return nil // a short read at the end is not a failure
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *Faulty) Stat(ctx context.Context, key string) (info ObjectInfo, err error) {
	err = f.do(ctx, OpStat, key, func() (err error) {
		info, err = f.inner.Stat(ctx, key)
		return err
	})
	return info, err
}

// Put reads the body once; a transient retry of a Put therefore needs the
// body again, so the wrapper buffers it only when a rule could fire.
func (f *Faulty) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	f.mu.Lock()
	hasRules := len(f.rules) > 0
	f.mu.Unlock()
	if !hasRules {
		return f.do(ctx, OpPut, key, func() error { return f.inner.Put(ctx, key, r, size) })
	}
	body, err := io.ReadAll(r)
	if err != nil {
		f.Record(OpPut, key, OutcomeOf(err))
		return err
	}
	return f.do(ctx, OpPut, key, func() error {
		return f.inner.Put(ctx, key, bytes.NewReader(body), size)
	})
}

func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPutIfAbsent, key, func() error { return f.inner.PutIfAbsent(ctx, key, data) })
}

func (f *Faulty) List(ctx context.Context, prefix, startAfter string) (infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() (err error) {
		infos, err = f.inner.List(ctx, prefix, startAfter)
		return err
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(ctx, OpDelete, key, func() error { return f.inner.Delete(ctx, key) })
}

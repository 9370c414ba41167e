package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrCrashed is returned by every operation on a Mem store after it has
// crashed (see Mem.Crash): the simulated process is dead.
var ErrCrashed = errors.New("store crashed (simulated)")

// Mem is an in-memory store for crash tests. Every acknowledged write is
// durable (like S3 and the fsyncing file store), every write is atomic (a
// write interrupted by a crash is either wholly there or absent, never
// partial), and put-if-absent has the same semantics as the other backends.
//
// A crash is simulated by Crash (now) or by a crash point (CrashAt,
// CrashWhen): the write that hits the crash point is applied or not, as the
// test chose, and returns ErrCrashed; so does every later operation, as if the
// process had died. CrashClone then gives the store a restarted process
// would see: exactly the writes that were applied.
//
// Every operation is recorded (Recorder), so tests can count and inspect them.
type Mem struct {
	Recorder

	mu      sync.Mutex
	objs    map[string]memObj
	crashed bool
	crashFn func(op OpKind, key string) (crash, apply bool)
	now     func() time.Time
}

type memObj struct {
	data []byte
	mod  time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{objs: map[string]memObj{}, now: time.Now} }

// String is constant ("mem://") so messages and traces are deterministic.
func (m *Mem) String() string { return "mem://" }

// Crash simulates a process crash now: every later operation returns
// ErrCrashed. Nothing acknowledged is lost.
func (m *Mem) Crash() {
	m.mu.Lock()
	m.crashed = true
	m.mu.Unlock()
}

// Crashed reports whether the store has crashed.
func (m *Mem) Crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

// CrashWhen installs a crash point: fn is called for every write (Put,
// PutIfAbsent, Delete) before it takes effect; when it returns crash=true the
// store crashes there, applying that write first if apply is true (the
// request reached the store but the process died before learning so). nil
// removes the crash point.
func (m *Mem) CrashWhen(fn func(op OpKind, key string) (crash, apply bool)) {
	m.mu.Lock()
	m.crashFn = fn
	m.mu.Unlock()
}

// CrashAt crashes at the n-th write (0-based) from now, applying it first if
// apply is true.
func (m *Mem) CrashAt(n int, apply bool) {
	var mu sync.Mutex
	seen := 0
	m.CrashWhen(func(OpKind, string) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		return seen == n+1, apply
	})
}

// CrashClone returns a new, live store holding exactly the objects this one
// holds (every applied write), as a restarted process would find them. Its
// trace starts empty.
func (m *Mem) CrashClone() *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	c.now = m.now
	for k, o := range m.objs {
		c.objs[k] = o // data slices are never mutated in place
	}
	return c
}

// Keys returns every key in order.
func (m *Mem) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.objs))
	for k := range m.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// begin checks the key and the crash state for one operation; the caller
// holds m.mu.
func (m *Mem) begin(ctx context.Context, op OpKind, key string) error {
	if m.crashed {
		return fmt.Errorf("%s: %s %q: %w", m, op, key, ErrCrashed)
	}
	if op == OpList {
		if err := validatePrefix(key); err != nil {
			return err
		}
	} else if err := ValidateKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

// crashPoint reports whether this write is the crash point and whether it
// must be applied; the caller holds m.mu.
func (m *Mem) crashPoint(op OpKind, key string) (crash, apply bool) {
	if m.crashFn == nil {
		return false, false
	}
	crash, apply = m.crashFn(op, key)
	if crash {
		m.crashed = true
	}
	return crash, apply
}

func (m *Mem) done(op OpKind, key string, err error) error {
	m.Record(op, key, OutcomeOf(err))
	return err
}

func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpGet, key); err != nil {
		return nil, m.done(OpGet, key, err)
	}
	o, ok := m.objs[key]
	if !ok {
		return nil, m.done(OpGet, key, fmt.Errorf("%s: %q: %w", m, key, ErrNotFound))
	}
	m.done(OpGet, key, nil)
	return bytes.Clone(o.data), nil
}

type memObject struct {
	*bytes.Reader
	size int64
}

func (o memObject) Size() int64  { return o.size }
func (o memObject) Close() error { return nil }

func (m *Mem) Open(ctx context.Context, key string) (Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpOpen, key); err != nil {
		return nil, m.done(OpOpen, key, err)
	}
	o, ok := m.objs[key]
	if !ok {
		return nil, m.done(OpOpen, key, fmt.Errorf("%s: %q: %w", m, key, ErrNotFound))
	}
	m.done(OpOpen, key, nil)
	return memObject{Reader: bytes.NewReader(o.data), size: int64(len(o.data))}, nil
}

func (m *Mem) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpStat, key); err != nil {
		return ObjectInfo{}, m.done(OpStat, key, err)
	}
	o, ok := m.objs[key]
	if !ok {
		return ObjectInfo{}, m.done(OpStat, key, fmt.Errorf("%s: %q: %w", m, key, ErrNotFound))
	}
	m.done(OpStat, key, nil)
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.mod}, nil
}

func (m *Mem) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	r = orEmpty(r)
	// Read the body before taking the lock: a failing reader must leave no
	// trace, and a slow one must not block other operations.
	data, err := io.ReadAll(ctxReader{ctx: ctx, r: r})
	if err == nil && size >= 0 && int64(len(data)) != size {
		err = fmt.Errorf("%s: put %q: the body had %d bytes, expected %d", m, key, len(data), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if berr := m.begin(ctx, OpPut, key); berr != nil {
		return m.done(OpPut, key, berr)
	}
	if err != nil {
		return m.done(OpPut, key, err)
	}
	crash, apply := m.crashPoint(OpPut, key)
	if !crash || apply {
		m.objs[key] = memObj{data: data, mod: m.now()}
	}
	if crash {
		return m.done(OpPut, key, fmt.Errorf("%s: put %q: %w", m, key, ErrCrashed))
	}
	return m.done(OpPut, key, nil)
}

func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpPutIfAbsent, key); err != nil {
		return m.done(OpPutIfAbsent, key, err)
	}
	_, exists := m.objs[key]
	crash, apply := m.crashPoint(OpPutIfAbsent, key)
	if !exists && (!crash || apply) {
		m.objs[key] = memObj{data: bytes.Clone(data), mod: m.now()}
	}
	switch {
	case crash:
		return m.done(OpPutIfAbsent, key, fmt.Errorf("%s: put-if-absent %q: %w", m, key, ErrCrashed))
	case exists:
		return m.done(OpPutIfAbsent, key, fmt.Errorf("%s: put-if-absent %q: %w", m, key, ErrExists))
	}
	return m.done(OpPutIfAbsent, key, nil)
}

func (m *Mem) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpList, prefix); err != nil {
		return nil, m.done(OpList, prefix, err)
	}
	var out []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	m.done(OpList, prefix, nil)
	return out, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, OpDelete, key); err != nil {
		return m.done(OpDelete, key, err)
	}
	crash, apply := m.crashPoint(OpDelete, key)
	if !crash || apply {
		delete(m.objs, key)
	}
	if crash {
		return m.done(OpDelete, key, fmt.Errorf("%s: delete %q: %w", m, key, ErrCrashed))
	}
	return m.done(OpDelete, key, nil)
}

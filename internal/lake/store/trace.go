package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// TraceEntry is one operation as a store saw it. Outcome is a short, stable
// word so traces can be compared with golden files: "ok", "exists",
// "not-found", "ambiguous", "crashed", "canceled", "invalid-key", "unsupported"
// or "error"; the fault injector prefixes injected outcomes with "injected-"
// (e.g. "injected-error", "injected-ambiguous-applied").
type TraceEntry struct {
	Op      OpKind
	Key     string // the key, or the prefix for List
	Outcome string
}

func (e TraceEntry) String() string { return fmt.Sprintf("%s %s %s", e.Op, e.Key, e.Outcome) }

// OutcomeOf classifies an operation's error into a TraceEntry outcome word.
func OutcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrCrashed):
		return "crashed"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, ErrNotFound):
		return "not-found"
	case errors.Is(err, ErrAmbiguous):
		return "ambiguous"
	case errors.Is(err, ErrInvalidKey):
		return "invalid-key"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	default:
		return "error"
	}
}

// Recorder collects a trace of operations; safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	entries []TraceEntry
}

// Record appends one entry.
func (r *Recorder) Record(op OpKind, key, outcome string) {
	r.mu.Lock()
	r.entries = append(r.entries, TraceEntry{Op: op, Key: key, Outcome: outcome})
	r.mu.Unlock()
}

// Trace returns a copy of the entries so far.
func (r *Recorder) Trace() []TraceEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]TraceEntry(nil), r.entries...)
}

// Count returns how many recorded operations were of kind op.
func (r *Recorder) Count(op OpKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if e.Op == op {
			n++
		}
	}
	return n
}

// Reset forgets the entries so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.entries = nil
	r.mu.Unlock()
}

// TraceString renders the trace one entry per line (for golden files).
func (r *Recorder) TraceString() string {
	var b strings.Builder
	for _, e := range r.Trace() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

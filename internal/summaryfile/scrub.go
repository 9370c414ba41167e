package summaryfile

import (
	"slices"
	"time"
)

// Due is a summary's scrub: of the entries es (in the order that breaks a
// tie between equal times), those whose last full check (at) is the
// oldest — at least the 1/share of them — and every one checked longer
// than maxAge before now. A caller re-checks them in full even when the
// summary says they are unchanged, so what a fingerprint cannot see is
// found within share runs or maxAge.
func Due[E any](es []E, at func(E) time.Time, share int, maxAge time.Duration, now time.Time) []E {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b E) int { return at(a).Compare(at(b)) })
	n := (len(es) + share - 1) / share
	for i, e := range es {
		if i >= n && now.Sub(at(e)) <= maxAge {
			return es[:i]
		}
	}
	return es
}

// Package summaryfile is the one format of the report caches oml keeps in
// the lake under _oml_summary/ (the lake summary, package lakesummary; the
// witness summary, package witness): a header line naming the format and
// holding the SHA-256 of the body, then the body, one entry a line; and
// how one is read from the lake and its outcome named for a report (Load,
// State).
//
// The hash only tells a torn or garbled object from a whole one: it is no
// signature (whoever can write the lake can write a matching header), so
// every user of a summary proves what it takes from it and scrubs it.
//
// Invariants: Seal's output always Opens to the same lines; an object
// whose header is not the expected one, whose body does not hash to it, or
// that is larger than the caller's bound is refused whole.
package summaryfile

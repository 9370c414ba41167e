// Package chainverify is oml's chain verifier engine: it proves, from the
// stored rows alone, that every journal chain is the one the deployment's
// key signed, in order, with nothing changed, removed or inserted since.
//
// It consumes a stream of stored events (grouped by tenant, provider chain
// first, seq ascending) and never holds a chain in memory: one goroutine
// recomputes each event's payload digest, envelope and hash and checks seq
// contiguity and prev_hash links in order, while signatures are verified in
// batches on every core. The result per chain is the first bad event (the
// lowest seq failing any check) with a Reason from a fixed set, or the
// verified head.
//
// Invariants:
//   - A chain's result is reported only after every one of its events read
//     was fully checked, links and signatures (so a checkpoint taken from it
//     never covers an unchecked event).
//   - The provider chain is fully verified before any other chain uses the
//     keys it issues or the tenant.created events genesis events point at;
//     anything at or after its first bad event is not trusted.
//   - The batch verdict and the per-signature verdict follow the same,
//     documented rule (docs/chain-verify.md, "Signatures oml accepts"), so a
//     verdict never depends on which other signatures shared a batch.
//   - Malformed rows are findings, never panics (fuzzed).
//
// The database side (streaming oml.journal, chain_heads, checkpoints) and
// the witness (signed heads outside PostgreSQL) live beside this package.
package chainverify

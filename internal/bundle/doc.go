// Package bundle is the auditor's proof of a chain, checkable with no
// database and no lake: `oml chain export` writes one, `oml chain verify
// --bundle` checks one. The format is documented byte by byte in
// docs/chain-bundle.md so a third party can write their own verifier.
//
// A bundle is JSON Lines: a header, the whole provider chain (it issues the
// keys and holds the tenant.created every genesis points at), the tenant's
// events from --from on, the tenant's signed heads (witnessed in the lake,
// and one signed at export when a key is at hand), and a trailer with the
// counts. Every event line carries the stored row exactly (payload as
// base64 of the signed bytes, recorded_at to the microsecond), so the
// verifier recomputes each payload digest, envelope and hash itself.
//
// # What verification proves, and what it does not
//
//   - Every event is the one the deployment key signed, in order, linked,
//     with no gap, from the genesis (or from the bundle's anchor when it
//     was exported --from a later seq: then only that the segment extends
//     the anchor, which the auditor must trust from elsewhere — a witnessed
//     head, an earlier bundle).
//   - Keys are those the bundle's own provider chain issued. Pin the root
//     with --root-key-id, learned out of band, or a bundle made with
//     another key verifies against itself.
//   - Each signed head is checked against the keys the verified provider
//     chain issued, and against the events: a head above the bundle's last
//     event means the bundle (or the database it came from) lost a tail; a
//     different hash at the same seq is a fork; an invalid head (garbage,
//     bad signature, a key never issued) is itself a problem, never ignored.
//   - A bundle cut short is caught by the trailer's counts; the trailer
//     itself is unsigned, so completeness up to the newest signed head is
//     what is proven, not past it.
package bundle

// Package chain owns oml's per-tenant signed hash chain: the canonical
// digest-only envelope every journal event is signed over (Envelope,
// Encode/DecodeEnvelope, EnvelopeHash, VerifySignature, Record.Check — the
// pieces a verifier needs), and the one append path that writes the journal.
//
// The envelope is specified byte by byte in docs/journal-envelope.md, with
// the test vector in testdata/envelope_v1.json.
//
// Invariants of a chain (tenant T):
//   - seq runs 1, 2, 3, ... without gaps; PRIMARY KEY (tenant_id, seq) is
//     the last defence against a fork.
//   - prev_hash of seq n is the hash of seq n-1; all zero for seq 1.
//   - hash = SHA-256(envelope); signature = Ed25519(deployment key, envelope).
//   - payload is stored exactly as signed and is digest-only.
//   - recorded_at never decreases along a chain.
package chain

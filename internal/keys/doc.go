// Package keys owns the deployment's ed25519 signing key on disk: generating
// it, writing it, loading it, and naming it (the key id).
//
// File format: PEM, one block of type "PRIVATE KEY" holding the PKCS#8 DER
// encoding of the ed25519 private key (RFC 8410), exactly what
// `openssl genpkey -algorithm ed25519` writes and what
// `openssl pkey -in FILE -pubout` reads. Nothing else may be in the file.
//
// Invariants:
//   - A key file is written with mode 0600 and never silently replaced:
//     WriteFile refuses an existing path unless force is set, and a forced
//     write replaces the file atomically (temp file + rename).
//   - LoadFile refuses a file that group or others can read or write (as
//     ssh does for private keys): a deployment key readable by other users
//     is a key that must be considered leaked.
//   - The key id is lowercase hex of the first 16 bytes of
//     SHA-256(32-byte public key): 32 hex characters (docs/journal-envelope.md).
//   - No error message ever contains key material.
package keys

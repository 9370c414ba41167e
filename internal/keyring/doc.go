// Package keyring is the deployment key's lifecycle on the provider chain,
// behind `oml key rotate|revoke|list`: issuing a new key (key.issued,
// signed by the current one), revoking an old one (key.revoked, signed by
// another key that is still valid, naming every chain's head at that
// moment), and listing every key with its role, issuance and revocation.
//
// What a revocation means is the verifier's rule (internal/chainverify,
// docs/chain-verify.md "Key rotation and revocation"): an event signed by
// the revoked key above its chain's head recorded in the revocation is a
// finding; earlier events stay valid. The append path refuses a revoked
// signer (the journal fold), so only someone holding the key and writing
// behind the application's back can produce such an event — and verify
// names it.
//
// The procedure this package supports, in order: rotate (the new key is
// issued), move every writer to the new key (the lake writer reloads its
// key file by itself), then revoke the old key. Heads are read under the
// provider chain's lock in the revocation's own transaction, but tenant
// chains keep appending meanwhile: an event the old key signs after that
// read is, correctly, a finding — so revoke only once no writer uses it.
package keyring

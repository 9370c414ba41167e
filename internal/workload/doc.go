// Package workload generates a realistic oml workload through the real
// append path (internal/chain): tenants submit claims whose bodies are
// AES-256-GCM ciphertext under a per-artifact data key (the journal carries
// only the plaintext and ciphertext digests), identities other than the
// writer promote some of them, and some promoted claims are later demoted,
// erased (the data key is destroyed), reassigned or ended with their
// simulation. It backs `oml dev load` and the lake writer's randomized tests.
//
// Poison rows (Config.Poison) are planted behind the application's back, as
// an operator or a bug might: a held body whose bytes no longer match the
// journalled ciphertext digest, a held body that is missing, and a retract
// row whose payload cannot be decoded. The lake writer must dead-letter each
// after its retry budget. Every planted poison row is reported with what it
// takes to repair it.
//
// Everything is deterministic for a given Seed except wall-clock times and
// tenant ids, so a failing randomized test replays from its printed seed.
package workload

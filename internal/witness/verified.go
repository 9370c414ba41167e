package witness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
)

// verifiedCap bounds the verified-signature cache: at most this many
// entries (a 32-byte key each, plus the map's overhead) are kept; a full cache is emptied and
// refilled, never consulted beyond what it holds.
const verifiedCap = 1 << 16

// verified remembers, for the life of the process, the exact (public key,
// message, signature) byte strings whose ed25519 signature verified, so a
// long-running process (`oml doctor --watch`, the TUI, the lake writer's
// fork check before each drain) does not verify the same unchanged witness
// again on every pass. It is safe because verification is a deterministic
// function of those three byte strings and the key of an entry stands for
// all three, whole: a witness with any other tenant, seq, hash, time,
// cluster, key id or signature byte, or checked against another public key,
// is a miss and is verified in full. Only successes are stored; nothing is
// ever persisted.
var verified struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]struct{}
}

// verifiedKey is the SHA-256 of the triple's length-prefixed encoding
// (verifiedEncoding). The encoding is unambiguous, so two different
// triples share a key only if SHA-256 collides: a hit is as good as the
// whole triple it stands for. Keying by the triple itself cost about 250
// bytes an entry (a witness's message is most of it), 1.5 MB at 10,000
// tenants in the lake writer's heap.
func verifiedKey(pub ed25519.PublicKey, msg, sig []byte) [sha256.Size]byte {
	h := sha256.New()
	var n [2]byte
	for _, b := range [][]byte{pub, msg, sig} {
		n[0], n[1] = byte(len(b)>>8), byte(len(b))
		h.Write(n[:])
		h.Write(b)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// verifySig is ed25519.Verify with the cache in front.
func verifySig(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(msg) > 0xffff || len(sig) > 0xffff {
		return false
	}
	k := verifiedKey(pub, msg, sig)
	verified.mu.Lock()
	_, ok := verified.m[k]
	verified.mu.Unlock()
	if ok {
		return true
	}
	if !ed25519.Verify(pub, msg, sig) {
		return false
	}
	verified.mu.Lock()
	if verified.m == nil || len(verified.m) >= verifiedCap {
		verified.m = make(map[[sha256.Size]byte]struct{}, 1024)
	}
	verified.m[k] = struct{}{}
	verified.mu.Unlock()
	return true
}

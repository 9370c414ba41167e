package witness

import (
	"crypto/ed25519"
	"sync"
)

// verifiedCap bounds the verified-signature cache: at most this many
// entries (about 250 bytes each) are kept; a full cache is emptied and
// refilled, never consulted beyond what it holds.
const verifiedCap = 1 << 16

// verified remembers, for the life of the process, the exact (public key,
// message, signature) byte strings whose ed25519 signature verified, so a
// long-running process (`oml doctor --watch`, the TUI, the lake writer's
// fork check before each drain) does not verify the same unchanged witness
// again on every pass. It is safe because verification is a deterministic
// function of those three byte strings and the key of an entry is all three,
// whole: a witness with any other tenant, seq, hash, time, cluster, key id
// or signature byte, or checked against another public key, is a miss and is
// verified in full. Only successes are stored; nothing is ever persisted.
var verified struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func verifiedKey(pub ed25519.PublicKey, msg, sig []byte) string {
	b := make([]byte, 0, 2+len(pub)+2+len(msg)+len(sig))
	// Length-prefixed, so no two different triples make the same key.
	b = append(b, byte(len(pub)>>8), byte(len(pub)))
	b = append(b, pub...)
	b = append(b, byte(len(msg)>>8), byte(len(msg)))
	b = append(b, msg...)
	b = append(b, sig...)
	return string(b)
}

// verifySig is ed25519.Verify with the cache in front.
func verifySig(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(msg) > 0xffff {
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
		verified.m = make(map[string]struct{}, 1024)
	}
	verified.m[k] = struct{}{}
	verified.mu.Unlock()
	return true
}

package witness

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
	"unique"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/store"
)

// A Publisher is how a long-running process (the lake writer) publishes
// signed heads: CheckExtends, then Publish and PublishCheckpoint, with the
// newest witness it published for each tenant remembered, so the tenant's
// next publication neither re-reads nor re-verifies it.
//
// Without a remembered witness (the first publication of a tenant in this
// process, or after anything below did not hold) a publication is exactly
// the three calls above. With one, at (seq s, hash H), it is:
//
//  1. One listing of the tenant's objects from s on. It must show the
//     JSON witness at s, as put, and nothing past s but s's checkpoint.
//     This is how another writer's witness is detected (`oml chain
//     witness`, the lake writer of another lease): any witness it
//     published after ours is at a seq above s, so it is in the listing;
//     the publication then takes the full path, which reads and checks
//     it. Without the listing such a witness, on a chain that forked after
//     s, would be hidden behind ours for good. (A put-if-absent cannot see
//     it: it only fails on the one key it writes.)
//  2. The head at s with hash H again: nothing to publish (the witness at s
//     is the same (seq, hash); Publish would be a no-op), but s's
//     checkpoint when the listing lacks it (its best-effort put failed).
//  3. A head past s: the chain of the head must hold H at s (contains,
//     one journal read). A hash chain holding H at s holds everything
//     before s as it was when ours was published, and ours extended every
//     earlier witness then, so it extends them all. Then it is signed and
//     put like any head.
//  4. Anything else (the chain does not hold H at s, a head below s, an
//     unexpected object in the listing, a store error): the full path,
//     whose answer (ErrNotExtending, ErrConflict, a fork acceptance
//     excusing the loss) is the one the process would have got without
//     the memory. The memory of the tenant is dropped first.
//
// What the memory saves is the previous witness's read and signature check
// and a second, always empty listing; for an unchanged head also the
// journal read, both signatures and both puts (each wrote and fsynced a
// temporary file before finding its key taken) and their read-backs. Every
// check that can find a forged or rolled-back witness is still made,
// against a witness this process itself put, which it trusts more than a
// copy read back from the store. A remembered witness is ours alone:
// nothing read from the store is ever remembered without having passed the
// full path first. As without the memory, a witness another writer puts
// between the listing and our put is not seen by this publication (unless
// at the same seq: the put-if-absent fails and compares); the next
// publication and the fork check see it.
type Publisher struct {
	st store.Store

	mu   sync.Mutex
	last map[uuid.UUID]ownWitness
	note map[string]noteKey // by key id and public key
}

// ownWitness is the newest witness a Publisher put (or found already put,
// with the same hash) for a tenant after its head passed the extends check.
type ownWitness struct {
	seq  int64
	hash [32]byte
	size int64 // the JSON object's size as stored
	// The rest of the head, for the fork check (Remembered), and the
	// public key it was signed with: the zero handle when the signer did
	// not say (not a NoteSigner), and such a witness is read like any
	// other. Handles (unique.Make), because a cluster's identity and a
	// key are the same for every tenant: one copy each, not one a tenant.
	micros                  int64 // Time, in µs (what the message signs)
	system, timeline, keyID unique.Handle[string]
	pub                     unique.Handle[string]
}

// noteKey is a NoteSigner's signed-note key name and key hash, computed
// once per key rather than per checkpoint.
type noteKey struct {
	name string
	hash uint32
}

// NewPublisher returns a Publisher writing to st.
func NewPublisher(st store.Store) *Publisher {
	return &Publisher{st: st, last: map[uuid.UUID]ownWitness{}, note: map[string]noteKey{}}
}

// Check is what a publication checks a head against (CheckExtends's
// arguments): the keys trusted, whether the head's chain holds an earlier
// witness, and which earlier witnesses a fork acceptance excuses (nil:
// none).
type Check struct {
	Trusted  KeyLookup
	Contains Contains
	Excused  func(*Head) bool
}

// Outcome is what a publication did.
type Outcome int

const (
	// Put: the head was signed and its witness put (or an equal witness was
	// already there: Publish's no-op).
	Put Outcome = iota + 1
	// Unchanged: the head is the witness this Publisher put last for the
	// tenant, and nothing newer is witnessed: nothing new to put.
	Unchanged
	// Superseded: a newer witness than the head is published (by another
	// publisher, after the head was read) and the chain holds it: the head
	// is stale, nothing was put, and nothing was lost (ErrSuperseded).
	Superseded
)

// Publish checks h (unsigned; Time, seq, hash and identity filled) against
// the tenant's earlier witnesses, signs it with s and publishes it with
// its C2SP checkpoint when s is a NoteSigner. Errors are CheckExtends's
// and Publish's (ErrNotExtending, ErrConflict: fork evidence; anything
// else: the store or the journal); a checkpoint that cannot be published
// is returned in cpErr, beside a published witness (best effort).
func (p *Publisher) Publish(ctx context.Context, h *Head, s Signer, c Check) (out Outcome, cpErr, err error) {
	v, err := p.fast(ctx, h, c)
	if err != nil {
		return 0, nil, err
	}
	switch v {
	case unchanged:
		return Unchanged, nil, nil
	case checkpointMissing:
		return Unchanged, p.putCheckpoint(ctx, h, s), nil
	case full:
		p.forget(h.Tenant)
		if err := CheckExtends(ctx, p.st, h, c.Trusted, c.Contains, c.Excused); errors.Is(err, ErrSuperseded) {
			return Superseded, nil, nil
		} else if err != nil {
			return 0, nil, err
		}
	}
	return p.put(ctx, h, s)
}

// verdict is what the remembered witness says about a head.
type verdict int

const (
	full              verdict = iota // no memory, or it does not settle the head: the full path
	unchanged                        // step 2
	checkpointMissing                // step 2, but the checkpoint's put failed before (or it is gone): put it
	extends                          // step 3: checked, to be put
)

// fast is steps 1–3 of the Publisher's comment.
func (p *Publisher) fast(ctx context.Context, h *Head, c Check) (verdict, error) {
	p.mu.Lock()
	l, ok := p.last[h.Tenant]
	p.mu.Unlock()
	if !ok || h.Seq < l.seq {
		return full, nil
	}
	// 1. The only store call before the put: another writer's witness
	// after ours is in it.
	prefix := Prefix + h.Tenant.String() + "/"
	from := fmt.Sprintf("%s%020d", prefix, l.seq) // sorts just before s's .checkpoint and .json
	infos, err := p.st.List(ctx, prefix, from)
	if err != nil {
		return full, fmt.Errorf("list the witnesses of tenant %s in %s: %w", h.Tenant, p.st, err)
	}
	ownKey, ownCheckpoint, seen, cpSeen := Key(h.Tenant, l.seq), CheckpointKey(h.Tenant, l.seq), false, false
	for _, info := range infos {
		switch {
		case info.Key == ownKey && info.Size == l.size:
			seen = true
		case info.Key == ownCheckpoint:
			cpSeen = true
		default:
			return full, nil // newer, rewritten or unknown: the full path reads it
		}
	}
	if !seen {
		return full, nil // ours is gone: the full path puts the head again
	}
	// 2. The same head again.
	if h.Seq == l.seq {
		if !h.SameHash(l.hash[:]) {
			return full, nil // another hash at our seq: the full path says what it is
		}
		if !cpSeen {
			return checkpointMissing, nil
		}
		return unchanged, nil
	}
	// 3. The chain of the head must still hold ours (one journal read).
	in, err := c.Contains(ctx, l.seq, l.hash[:])
	if err != nil {
		return full, err
	}
	if !in {
		return full, nil
	}
	return extends, nil
}

// put signs h and publishes it and its checkpoint, remembering it.
func (p *Publisher) put(ctx context.Context, h *Head, s Signer) (Outcome, error, error) {
	if err := h.Sign(s); err != nil {
		return 0, nil, err
	}
	_, size, err := publish(ctx, p.st, h)
	if err != nil {
		return 0, nil, err
	}
	var pub unique.Handle[string]
	if ns, ok := s.(NoteSigner); ok {
		pub = unique.Make(string(ns.Public()))
	}
	p.remember(h, size, pub)
	return Put, p.putCheckpoint(ctx, h, s), nil
}

// putCheckpoint signs and puts h's checkpoint when s can sign notes.
func (p *Publisher) putCheckpoint(ctx context.Context, h *Head, s Signer) error {
	ns, ok := s.(NoteSigner)
	if !ok {
		return nil
	}
	note, err := signCheckpoint(h, ns, p.noteKey(ns))
	if err != nil {
		return err
	}
	return publishCheckpoint(ctx, p.st, h, note)
}

func (p *Publisher) remember(h *Head, size int64, pub unique.Handle[string]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.last[h.Tenant]; ok && l.seq > h.Seq {
		return // a later one of ours (two publications at once): keep it
	}
	w := ownWitness{seq: h.Seq, size: size, micros: h.Time.UnixMicro(),
		system: unique.Make(h.SystemIdentifier), timeline: unique.Make(h.Timeline), keyID: unique.Make(h.KeyID), pub: pub}
	copy(w.hash[:], h.HashBytes()) // Publish refused a head without 32 bytes of hash
	p.last[h.Tenant] = w
}

// Remembered is the fork check's use of the memory (NewestRemembered):
// the head of tenant id's newest listed witness when that object is the
// one p put last for the tenant (its key, and the size it was put with)
// and the key p signed it with is the one trusted reports for it now.
// Such a witness is not read back: p signed that head after checking that
// it extends the tenant's earlier witnesses, and trusts it more than a
// copy read from the store (see Publisher). A witness rewritten in place
// with its size kept is not seen here; oml doctor reads and verifies
// every witness (its scrub included) and reports it. When another
// publisher had put the same head (seq and hash) first and Publish found
// it there, the head returned carries this publisher's time and key
// instead of that object's: the same anchor, which is what the fork check
// compares with the journal.
func (p *Publisher) Remembered(id uuid.UUID, newest store.ObjectInfo, trusted KeyLookup) (*Head, bool) {
	p.mu.Lock()
	l, ok := p.last[id]
	p.mu.Unlock()
	if !ok || l.pub == (unique.Handle[string]{}) || newest.Size != l.size || newest.Key != Key(id, l.seq) {
		return nil, false
	}
	keyID := l.keyID.Value()
	pub, ok := trusted(keyID, id, l.seq)
	if !ok || string(pub) != l.pub.Value() {
		return nil, false
	}
	return &Head{Version: messageVersion, Tenant: id, Seq: l.seq, Hash: hex.EncodeToString(l.hash[:]),
		Time: time.UnixMicro(l.micros).UTC(), SystemIdentifier: l.system.Value(), Timeline: l.timeline.Value(), KeyID: keyID}, true
}

func (p *Publisher) forget(tenant uuid.UUID) {
	p.mu.Lock()
	delete(p.last, tenant)
	p.mu.Unlock()
}

// noteKey is ns's signed-note key name and hash, computed once per key.
func (p *Publisher) noteKey(ns NoteSigner) noteKey {
	pub := ns.Public()
	id := ns.KeyID() + "\x00" + string(pub)
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.note[id]
	if !ok {
		name := NoteKeyName(ns.KeyID())
		k = noteKey{name: name, hash: noteKeyHash(name, ed25519.PublicKey(pub))}
		p.note[id] = k
	}
	return k
}

// WillAsk returns, for the heads whose tenant has a remembered witness
// below them, the seq of that witness: the journal position Publish's
// Contains will be asked about first, for the caller to read at once
// (chainverify.ReadJournalHashes).
func (p *Publisher) WillAsk(heads []*Head) map[uuid.UUID]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[uuid.UUID]int64{}
	for _, h := range heads {
		if l, ok := p.last[h.Tenant]; ok && l.seq < h.Seq {
			out[h.Tenant] = l.seq
		}
	}
	return out
}

// RememberedSeq reports the seq of the witness p remembers for tenant
// (tests).
func (p *Publisher) RememberedSeq(tenant uuid.UUID) (seq int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.last[tenant]
	return l.seq, ok
}

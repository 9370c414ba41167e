// Package witness keeps signed chain heads outside PostgreSQL, in the lake's
// object store, so a failover that lost committed tail events (a chain that
// still verifies perfectly on its own) is caught: the fork check compares
// PostgreSQL's chain with the newest witnessed head.
//
// A signed head names (tenant, seq, hash, time, system_identifier,
// timeline, key_id) and is signed by the deployment key over a canonical
// binary message (see Message). Heads are written with put-if-absent under
//
//	_oml_witness/<tenant uuid>/<seq, 20 digits>.json
//
// so a witness is never overwritten and keys sort by seq: the newest head of
// a tenant is its last key. Publishing a head whose seq is already witnessed
// with another hash is itself fork evidence (ErrConflict).
//
// Invariants: a published witness is immutable; Newest only returns heads
// whose signature verifies under a key the caller trusts, and reports every
// newer witness it passed over (an invalid witness never hides a valid
// older one). NewestCached (cache.go) is Newest for reports, through a
// summary of the witnesses verified before, kept in the lake; a witness
// that does not verify is never kept, and nothing that writes uses it.
// A Publisher (publisher.go) is CheckExtends + Publish + PublishCheckpoint
// for a long-running publisher, remembering only witnesses it put itself
// after a full check, and never skipping the listing that shows another
// writer's newer witness.
package witness

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/store"
)

// Prefix is where witnesses live under the lake root (outside every Delta
// table directory, so no Delta reader ever sees them).
const Prefix = "_oml_witness/"

const (
	messageMagic   = "OMLH"
	messageVersion = 1
)

// Head is one signed head as stored (JSON, stable field names).
type Head struct {
	Version          int       `json:"version"`
	Tenant           uuid.UUID `json:"tenant"`
	Seq              int64     `json:"seq"`
	Hash             string    `json:"hash"` // lowercase hex
	Time             time.Time `json:"time"`
	SystemIdentifier string    `json:"system_identifier"`
	Timeline         string    `json:"timeline"`
	KeyID            string    `json:"key_id"`
	Signature        string    `json:"signature"` // standard base64
}

// Signer signs with the deployment key (keys.Key implements it).
type Signer interface {
	KeyID() string
	Sign(msg []byte) []byte
}

// Message is the canonical signed message of h: "OMLH" | u8 1 |
// tenant[16] | u64 seq | hash[32] | i64 time µs | str16 system_identifier
// | str16 timeline | str16 key_id (big-endian; str16 = u16 length + bytes).
func (h *Head) Message() ([]byte, error) {
	hash, err := hex.DecodeString(h.Hash)
	if err != nil || len(hash) != 32 {
		return nil, fmt.Errorf("witnessed head hash %q is not 32 bytes of hex", h.Hash)
	}
	if h.Seq < 1 {
		return nil, fmt.Errorf("witnessed head seq %d is not positive", h.Seq)
	}
	b := append([]byte(messageMagic), messageVersion)
	b = append(b, h.Tenant[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Seq))
	b = append(b, hash...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Time.UnixMicro()))
	for _, s := range []string{h.SystemIdentifier, h.Timeline, h.KeyID} {
		if len(s) > math.MaxUint16 {
			return nil, errors.New("witnessed head field longer than 65535 bytes")
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b, nil
}

// Sign fills KeyID, Version and Signature.
func (h *Head) Sign(s Signer) error {
	h.Version = messageVersion
	h.KeyID = s.KeyID()
	h.Time = h.Time.UTC().Truncate(time.Microsecond)
	msg, err := h.Message()
	if err != nil {
		return err
	}
	h.Signature = base64.StdEncoding.EncodeToString(s.Sign(msg))
	return nil
}

// Verify checks h's signature with pub.
func (h *Head) Verify(pub ed25519.PublicKey) error {
	msg, err := h.Message()
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(h.Signature)
	if err != nil || len(pub) != ed25519.PublicKeySize || !verifySig(pub, msg, sig) {
		return fmt.Errorf("witnessed head of tenant %s at seq %d: the signature does not verify under key %s", h.Tenant, h.Seq, h.KeyID)
	}
	return nil
}

// HashBytes is the head's hash as bytes (nil if malformed).
func (h *Head) HashBytes() []byte {
	b, err := hex.DecodeString(h.Hash)
	if err != nil || len(b) != 32 {
		return nil
	}
	return b
}

// Key is the object key of tenant's witness at seq.
func Key(tenant uuid.UUID, seq int64) string {
	return fmt.Sprintf("%s%s/%020d.json", Prefix, tenant, seq)
}

// ErrConflict means a witness already exists at the same tenant and seq
// with a different hash: two different chains claimed that position.
var ErrConflict = errors.New("a different head is already witnessed at this seq")

// Publish writes h (already signed) with put-if-absent. Publishing the same
// head again is a no-op (the stored one is kept, never overwritten); a
// different hash at the same seq returns ErrConflict with both hashes.
func Publish(ctx context.Context, st store.Store, h *Head) (created bool, err error) {
	created, _, err = publish(ctx, st, h)
	return created, err
}

// publish is Publish, also returning the size of the JSON object stored
// at h's key (ours, or the equal head found there).
func publish(ctx context.Context, st store.Store, h *Head) (created bool, size int64, err error) {
	data, err := json.Marshal(h)
	if err != nil {
		return false, 0, err
	}
	key := Key(h.Tenant, h.Seq)
	err = st.PutIfAbsent(ctx, key, data)
	switch {
	case err == nil:
		return true, int64(len(data)), nil
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrAmbiguous):
		stored, gerr := st.Get(ctx, key)
		var old Head
		if gerr == nil {
			if uerr := json.Unmarshal(stored, &old); uerr != nil {
				gerr = fmt.Errorf("witness %s is not a signed head: %v", key, uerr)
			}
		}
		if gerr != nil {
			return false, 0, fmt.Errorf("publish witness %s: %w (and reading it back failed: %v)", key, err, gerr)
		}
		if old.Hash != h.Hash {
			return false, 0, fmt.Errorf("%w: tenant %s seq %d is witnessed with hash %s, PostgreSQL has %s",
				ErrConflict, h.Tenant, h.Seq, old.Hash, h.Hash)
		}
		return errors.Is(err, store.ErrAmbiguous), int64(len(stored)), nil
	default:
		return false, 0, fmt.Errorf("publish witness %s to %s: %w", key, st, err)
	}
}

// Read reads one stored witness.
func Read(ctx context.Context, st store.Store, key string) (*Head, error) {
	data, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var h Head
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("witness %s is not a signed head: %v", key, err)
	}
	return &h, nil
}

// KeyLookup returns the public key of a key id the caller trusts for a
// head of tenant at seq (a revoked key is trusted only for heads at or
// below the point its revocation recorded for that chain).
type KeyLookup func(keyID string, tenant uuid.UUID, seq int64) (ed25519.PublicKey, bool)

// InvalidError is a stored witness that cannot be trusted: unreadable, not
// a signed head, stored under another tenant's or seq's key, signed by a
// key the caller does not trust, or with a signature that does not verify.
// It is evidence of tampering with the witness store (or of a writer
// signing with a key the deployment never issued): a finding, never a
// reason to trust nothing.
type InvalidError struct {
	Key    string    // object key
	Tenant uuid.UUID // from the object key
	Seq    int64     // from the object key
	Reason string    // one sentence
}

func (e *InvalidError) Error() string { return fmt.Sprintf("witness %s: %s", e.Key, e.Reason) }

// Newest returns, per tenant, the newest witnessed head whose signature
// verifies under trusted. A newer witness that does not verify never hides
// an older one that does (a garbage file at a higher seq would otherwise
// hide a lost tail): witnesses are read from the highest seq down until
// one verifies, and every one that did not is returned in bad as an
// *InvalidError. tenant limits the listing to one tenant when non-nil.
func Newest(ctx context.Context, st store.Store, tenant *uuid.UUID, trusted KeyLookup) (map[uuid.UUID]*Head, []error, error) {
	return newest(ctx, st, tenant, trusted, nil, nil)
}

// NewestRemembered is Newest over every tenant for the process that
// publishes through p (the lake writer's periodic fork check): a tenant
// whose newest listed witness is the one p put last is served from p's
// memory (Publisher.Remembered), not read and verified again; every other
// tenant's witnesses are read as Newest reads them.
func NewestRemembered(ctx context.Context, st store.Store, trusted KeyLookup, p *Publisher) (map[uuid.UUID]*Head, []error, error) {
	return newest(ctx, st, nil, trusted, nil, p)
}

// newest is Newest, with c (NewestCached's summary; nil: none) serving the
// tenants whose newest witness it verified before, unchanged, and p (nil:
// none) those whose newest witness it put.
func newest(ctx context.Context, st store.Store, tenant *uuid.UUID, trusted KeyLookup, c *cacheRun, p *Publisher) (map[uuid.UUID]*Head, []error, error) {
	prefix := Prefix
	if tenant != nil {
		prefix += tenant.String() + "/"
	}
	type entry struct {
		info store.ObjectInfo
		seq  int64
	}
	byTenant := map[uuid.UUID][]entry{}
	after := ""
	for {
		infos, err := st.List(ctx, prefix, after)
		if err != nil {
			return nil, nil, fmt.Errorf("list witnesses in %s: %w", st, err)
		}
		if len(infos) == 0 {
			break
		}
		for _, info := range infos {
			rest := strings.TrimPrefix(info.Key, Prefix)
			tid, file, ok := strings.Cut(rest, "/")
			id, err := uuid.Parse(tid)
			if !ok || err != nil || !strings.HasSuffix(file, ".json") {
				continue // not a witness's name: it cannot be picked as one either
			}
			seq, err := strconv.ParseInt(strings.TrimSuffix(file, ".json"), 10, 64)
			if err != nil {
				continue
			}
			byTenant[id] = append(byTenant[id], entry{info, seq})
		}
		after = infos[len(infos)-1].Key
	}
	if c != nil {
		c.kept = map[uuid.UUID]bool{}
	}
	// Tenants are read store.Concurrency at a time (one after another,
	// each a read and a signature check, was most of the fork check's time
	// at 7,000 tenants); each tenant's witnesses newest first, as before.
	out := map[uuid.UUID]*Head{}
	var bad []error
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(store.Concurrency(st))
	for id, es := range byTenant {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(b.seq, a.seq) })
		if p != nil {
			if h, ok := p.Remembered(id, es[0].info, trusted); ok {
				mu.Lock()
				out[id] = h
				mu.Unlock()
				continue
			}
		}
		g.Go(func() error {
			if c != nil {
				if h, ok := c.keep(id, es[0].info, trusted); ok {
					mu.Lock()
					out[id], c.fresh[id], c.kept[id] = h, c.old[id], true
					mu.Unlock()
					return nil
				}
			}
			for _, e := range es {
				h, pub, reason, err := readTrusted(gctx, st, e.info.Key, id, e.seq, trusted)
				if err != nil {
					return err
				}
				mu.Lock()
				if reason != "" {
					bad = append(bad, &InvalidError{Key: e.info.Key, Tenant: id, Seq: e.seq, Reason: reason})
					mu.Unlock()
					continue
				}
				out[id] = h
				if c != nil {
					c.fresh[id] = &cacheEntry{tenant: id, info: e.info, verifiedAt: c.now, pub: pub, head: h}
				}
				mu.Unlock()
				break
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(bad, func(a, b error) int { return strings.Compare(a.(*InvalidError).Key, b.(*InvalidError).Key) })
	return out, bad, nil
}

// readTrusted reads the witness at key and checks it against its own key
// and trusted. reason is why it cannot be trusted ("" when it can); err is
// for a store that could not be read at all.
func readTrusted(ctx context.Context, st store.Store, key string, id uuid.UUID, seq int64, trusted KeyLookup) (*Head, ed25519.PublicKey, string, error) {
	data, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, "listed but gone when read", nil
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("read witness %s from %s: %w", key, st, err)
	}
	var h Head
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, nil, fmt.Sprintf("not a signed head (%v)", err), nil
	}
	if h.Tenant != id || h.Seq != seq || Key(h.Tenant, h.Seq) != key {
		return nil, nil, fmt.Sprintf("names tenant %s seq %d, not its own key", h.Tenant, h.Seq), nil
	}
	pub, ok := trusted(h.KeyID, h.Tenant, h.Seq)
	if !ok {
		return nil, nil, fmt.Sprintf("signed by key %q, which the verified provider chain never issued", h.KeyID), nil
	}
	if err := h.Verify(pub); err != nil {
		return nil, nil, fmt.Sprintf("the signature does not verify under key %s", h.KeyID), nil
	}
	return &h, pub, "", nil
}

// SameHash reports whether h witnesses hash.
func (h *Head) SameHash(hash []byte) bool { return bytes.Equal(h.HashBytes(), hash) }

// ErrNotExtending means a head does not extend an earlier witness of its
// tenant: its seq is below the earlier witness, or its chain holds another
// hash at the earlier witness's seq. Publishing it would release a chain
// that lost or rewrote what was witnessed.
var ErrNotExtending = errors.New("the head does not extend an earlier witness of its tenant")

// ErrSuperseded means a head is older than a witness already published for
// its tenant (by another publisher, after the head was read) and the chain
// holds that newer witness: nothing was lost, the head is only stale, and
// publishing it would add nothing. It is not fork evidence.
var ErrSuperseded = errors.New("a newer witness the chain holds is already published for the tenant")

// Contains reports whether the chain of the head being published holds
// hash at seq: for a journal head, the journal's hash at seq as it is now,
// which may be past the head's own seq (a head read before the journal
// grew).
type Contains func(ctx context.Context, seq int64, hash []byte) (bool, error)

// CheckExtends returns nil when h extends every earlier trusted witness of
// its tenant in st, else an error wrapping ErrNotExtending naming the first
// earlier witness it does not extend, or ErrSuperseded when the newest
// witness is past h and the chain holds it (h is stale, nothing was lost).
// excused (may be nil) exempts earlier witnesses whose loss was accepted
// (chain.fork_accepted).
//
// Earlier witnesses are visited newest first, and the walk stops at the
// first one h's chain contains: every witness published through
// CheckExtends extended all earlier ones, so containing the newest implies
// containing them all, and the cost per publish is one listing and a
// read or two. Witnesses that do not verify are ignored here (they are a
// finding of the fork check, and cannot block a publish).
func CheckExtends(ctx context.Context, st store.Store, h *Head, trusted KeyLookup, contains Contains, excused func(*Head) bool) error {
	// One listing: a store's List returns every key past startAfter (it
	// pages internally), so asking again after the last key only ever
	// found nothing, at the cost of a second listing per publish.
	prefix := Prefix + h.Tenant.String() + "/"
	infos, err := st.List(ctx, prefix, "")
	if err != nil {
		return fmt.Errorf("list the witnesses of tenant %s in %s: %w", h.Tenant, st, err)
	}
	var keys []string
	for _, info := range infos {
		if strings.HasSuffix(info.Key, ".json") {
			keys = append(keys, info.Key)
		}
	}
	for i := len(keys) - 1; i >= 0; i-- {
		w, err := Read(ctx, st, keys[i])
		if err != nil || w.Tenant != h.Tenant || Key(w.Tenant, w.Seq) != keys[i] {
			continue
		}
		pub, ok := trusted(w.KeyID, w.Tenant, w.Seq)
		if !ok || w.Verify(pub) != nil {
			continue
		}
		// A witness past h that the chain holds after all: h was read
		// before another publisher (oml chain witness, a second writer)
		// witnessed a later head. contains answers for the chain as it is
		// now (the journal), so holding it means no committed event was
		// lost; only h is stale.
		in, err := contains(ctx, w.Seq, w.HashBytes())
		if err != nil {
			return err
		}
		if in && w.Seq > h.Seq {
			return fmt.Errorf("%w: tenant %s is witnessed at seq %d, past the head to publish (seq %d), and its journal holds that event",
				ErrSuperseded, h.Tenant, w.Seq, h.Seq)
		}
		if in {
			return nil
		}
		if excused != nil && excused(w) {
			continue
		}
		if w.Seq > h.Seq {
			return fmt.Errorf("%w: tenant %s was witnessed at seq %d (%s) but the head to publish is seq %d: committed events were lost",
				ErrNotExtending, h.Tenant, w.Seq, w.Time.UTC().Format(time.RFC3339), h.Seq)
		}
		return fmt.Errorf("%w: tenant %s was witnessed at seq %d with hash %s, and the chain of the head to publish (seq %d) holds another event there",
			ErrNotExtending, h.Tenant, w.Seq, w.Hash, h.Seq)
	}
	return nil
}

package chainverify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/omlhq/oml/internal/chain"
)

// DefaultBatchSize is the number of signatures verified together. 256 is
// where the batch verifier's cost per signature flattens on this hardware
// (shared/notes/chain-and-outbox-notes.md §2).
const DefaultBatchSize = 256

// Options tune one verification run. The zero value verifies every chain
// from its genesis with the default signature rule.
type Options struct {
	// Workers is the number of signature-verifying goroutines (default
	// GOMAXPROCS). The link checker runs beside them.
	Workers int
	// BatchSize is the signature batch size (default DefaultBatchSize).
	BatchSize int
	// Strict verifies each signature alone with crypto/ed25519 instead of
	// in batches: it additionally refuses signatures whose R carries a
	// small-order component (see docs/chain-verify.md). About 4x slower.
	Strict bool
	// Start returns the trusted head to resume a tenant's chain from (its
	// events must then begin at head.Seq+1 and link to head.Hash). The
	// provider chain is always verified from its genesis: it defines the
	// keys and the tenant references every other chain depends on.
	Start func(tenant uuid.UUID) (Head, bool)
	// RootKeyID pins the provider chain's root key.issued to a key id known
	// outside the database. Empty: the root is taken from the chain itself.
	RootKeyID string
	// OnChain is called once per chain read, after every event of it was
	// fully checked, with no two calls at once. It must not block long.
	OnChain func(ChainResult)
	// Progress, if set, is advanced as events are read and signatures checked.
	Progress *Progress
	// ProviderSigned, if set, is a head of the provider chain up to which
	// an earlier run verified every event in full, signatures included (its
	// checkpoint). The provider chain is still read and hash-checked from
	// its genesis (it defines the keys and tenants), but the signatures of
	// the events up to this head are held back, not verified, and dropped
	// once the recomputed chain reaches the head with its hash: those
	// events are then bit for bit what was verified (the envelope covers
	// every stored field but the signature itself). If the chain breaks,
	// ends or hashes to something else before that, every held-back
	// signature is verified after all, so the first bad event is what a
	// full run would report. What this cannot see is an edit of the
	// signature bytes alone below the head: the caller's scrub re-verifies
	// the provider chain in full within its period for that.
	ProviderSigned *Head
	// OnBroken, if set, is called on the goroutine ranging over the source,
	// before the source's yield returns, when a chain's first bad event is
	// found in order: the source may then skip the rest of that chain
	// (nothing after it is checked anyway).
	OnBroken func(tenant uuid.UUID)
	// OnProvider, if set, is called once, on the goroutine ranging over
	// the source, when the provider chain is done: every one of its
	// signatures checked (or confirmed by ProviderSigned), and the keys
	// issued at or after its first bad event dropped. keys and revoked are
	// then final (what Summary.Keys and Summary.Revocations will hold) and
	// the caller's own copies. A caller that needs only the provider's
	// trust (oml doctor's fork check) takes it here instead of verifying
	// the provider chain a second time or waiting for every other chain.
	// Not called when the source holds no provider chain.
	OnProvider func(keys map[string]*Key, revoked map[string]Revocation)
	// KeysOnly is for a source that holds the provider chain alone and a
	// caller that wants only its keys and revocations (IssuedKeys): the
	// tenant.created events are still parsed and checked, but the
	// references they make (one per tenant) are not kept, and
	// Summary.Created is empty. With ProviderSigned, the signatures up to
	// it are not held back either: if the chain does not reach that head
	// intact, Verify stops with ErrProviderUnconfirmed and the caller
	// verifies the chain again without ProviderSigned (a full run), so
	// what it learns is still what a full run reports, without holding a
	// copy of every envelope and signature below the head (about 250
	// bytes per tenant) while the chain is read.
	KeysOnly bool
}

// ErrProviderUnconfirmed: with Options.KeysOnly, the provider chain did
// not reach Options.ProviderSigned intact, and the signatures below it,
// not held back, were not verified. Verify again without ProviderSigned.
var ErrProviderUnconfirmed = errors.New("the provider chain does not reach the head verified before intact; verify it in full")

// Progress counts work done, for progress bars. Safe to read concurrently.
type Progress struct {
	Events     atomic.Int64
	Signatures atomic.Int64
}

// Summary is the outcome of a run.
type Summary struct {
	Chains   int
	Events   int64
	Findings []Finding
	// Created maps every tenant the verified provider chain created (a
	// tenant.created before the provider chain's first bad event) to the
	// provider seq that created it, so a caller can tell a tenant whose
	// whole chain is missing.
	Created map[uuid.UUID]int64
	// Keys holds every key the verified provider chain issued (issued
	// before its first bad event), by key id: the only keys anything signed
	// for this deployment (events, witnessed heads) may be checked against.
	Keys map[string]*Key
	// Revocations holds every key.revoked of the provider chain, by key id.
	Revocations map[string]Revocation
}

// ErrOutOfOrder means the event source broke its contract (chains must be
// contiguous, in ascending tenant order with the provider first, each in
// ascending seq order). It is a bug in the source, not a finding.
var ErrOutOfOrder = errors.New("journal events arrived out of (tenant, seq) order")

// Verify checks every chain in events, which must arrive grouped by tenant
// in ascending tenant order (the provider tenant, the nil UUID, first) and
// in ascending seq order within a tenant. It never holds more than a few
// batches of events in memory.
//
// How the work is split: one goroutine (the caller's) decodes each event,
// recomputes its payload digest, envelope and hash and checks seq and
// prev_hash in order; signatures are cut into batches that Workers
// goroutines verify concurrently. A chain's result is final once the link
// checker has moved past it and every batch holding one of its events is
// done; that is when OnChain fires. The first bad event of a chain is the
// lowest seq that failed any check.
//
// The returned error is for a run that could not finish (the source
// failed, ctx was cancelled, the order contract was broken); findings are
// not errors.
func Verify(ctx context.Context, events iter.Seq2[*Event, error], opts Options) (Summary, error) {
	e := newEngine(opts)
	defer e.stop()
	for ev, err := range events {
		if err != nil {
			return Summary{}, err
		}
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		if err := e.handle(ctx, ev); err != nil {
			return Summary{}, err
		}
	}
	if err := e.finishStream(ctx); err != nil {
		return Summary{}, err
	}
	e.cbMu.Lock()
	defer e.cbMu.Unlock()
	e.summary.Created = make(map[uuid.UUID]int64, len(e.refs))
	for seq, r := range e.refs {
		if old, dup := e.summary.Created[r.tenant]; !dup || seq < old {
			e.summary.Created[r.tenant] = seq
		}
	}
	e.summary.Keys = make(map[string]*Key, len(e.keys))
	for id, k := range e.keys {
		e.summary.Keys[id] = k
	}
	e.summary.Revocations = make(map[string]Revocation, len(e.revoked))
	for id, r := range e.revoked {
		e.summary.Revocations[id] = r
	}
	return e.summary, nil
}

type engine struct {
	opts Options

	// Owned by the link-checker goroutine.
	cur          *chainState
	providerDone bool
	keys         map[string]*Key
	refs         map[int64]providerRef
	// revoked: key id -> the revocation (per-chain points). Kept even when
	// the provider chain breaks after it: a revocation only removes trust.
	revoked map[string]Revocation
	scratch []byte
	batch   *batch

	work chan *batch
	free chan *batch
	wg   sync.WaitGroup

	cbMu    sync.Mutex
	summary Summary
}

// Revocation is one key.revoked of the verified provider chain: the
// revocation's provider seq and, per chain, the head it recorded.
type Revocation struct {
	ProviderSeq int64
	Cuts        map[uuid.UUID]int64
}

// Point is the last seq of chain t the revoked key may still have signed:
// the head the revocation recorded (0 for a chain it does not list), and
// on the provider chain the revocation's own seq.
func (r Revocation) Point(t uuid.UUID) int64 {
	if t == ProviderTenant {
		return r.ProviderSeq
	}
	return r.Cuts[t]
}

type providerRef struct {
	hash   chain.Hash
	tenant uuid.UUID
}

type chainState struct {
	tenant uuid.UUID
	from   Head
	// Owned by the link checker until closed.
	last        Head
	events      int64
	linkFinding *Finding
	// held: the signatures held back up to Options.ProviderSigned
	// (holding: still before it); skipped: how many were dropped.
	held    []heldSig
	holding bool
	skipped int64

	mu       sync.Mutex
	pending  int // batches in flight holding events of this chain
	closed   bool
	finished bool
	sigBad   *Finding
	sigLast  Head
	done     chan struct{}
}

type sigJob struct {
	chain    *chainState
	seq      int64
	key      *Key
	off, end int // envelope bytes in batch.buf
	sig      [ed25519.SignatureSize]byte
}

// heldSig is one signature held back (Options.ProviderSigned).
type heldSig struct {
	seq      int64
	key      *Key
	env, sig []byte
}

type batch struct {
	jobs   []sigJob
	buf    []byte
	chains []*chainState
}

func newEngine(opts Options) *engine {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	e := &engine{
		opts:    opts,
		keys:    map[string]*Key{},
		refs:    map[int64]providerRef{},
		revoked: map[string]Revocation{},
		// Two batches per worker in flight bound memory and keep the
		// workers fed while the link checker fills the next one.
		work: make(chan *batch, opts.Workers*2),
		free: make(chan *batch, opts.Workers*3+2),
	}
	for range opts.Workers {
		e.wg.Add(1)
		go e.worker()
	}
	return e
}

func (e *engine) stop() {
	close(e.work)
	e.wg.Wait()
}

func zeroHead() Head { return Head{Seq: 0, Hash: make([]byte, 32)} }

func (e *engine) handle(ctx context.Context, ev *Event) error {
	if e.cur == nil || ev.Tenant != e.cur.tenant {
		if e.cur != nil && bytes.Compare(ev.Tenant[:], e.cur.tenant[:]) < 0 {
			return fmt.Errorf("%w: tenant %s after %s", ErrOutOfOrder, ev.Tenant, e.cur.tenant)
		}
		if err := e.closeChain(ctx); err != nil {
			return err
		}
		if !e.providerDone && ev.Tenant != ProviderTenant {
			// No provider chain in the stream: nothing issued any key.
			e.recordMissingProvider()
			e.providerDone = true
		}
		e.openChain(ev.Tenant)
	}
	c := e.cur
	c.events++
	if p := e.opts.Progress; p != nil {
		p.Events.Add(1)
	}
	if c.linkFinding != nil {
		return nil // first bad event already found; read past the rest
	}
	f, err := e.check(c, ev)
	if err != nil {
		return err
	}
	if f != nil {
		f.Tenant = c.tenant
		c.linkFinding = f
		if err := e.release(c); err != nil { // the chain never reached ProviderSigned: verify what was held
			return err
		}
		if e.opts.OnBroken != nil {
			e.opts.OnBroken(c.tenant)
		}
	}
	return nil
}

// check runs every in-order check on ev and queues its signature. It
// returns the finding for ev, if any.
func (e *engine) check(c *chainState, ev *Event) (*Finding, error) {
	want := c.last.Seq + 1
	if ev.Seq != want {
		if ev.Seq < want {
			return nil, fmt.Errorf("%w: tenant %s seq %d after seq %d", ErrOutOfOrder, c.tenant, ev.Seq, c.last.Seq)
		}
		return &Finding{Seq: want, Reason: ReasonSeqGap,
			Detail:   fmt.Sprintf("seq %d is missing: the next stored event is seq %d", want, ev.Seq),
			Evidence: map[string]string{"expected_seq": fmt.Sprint(want), "found_seq": fmt.Sprint(ev.Seq)},
		}, nil
	}
	if !bytes.Equal(ev.PrevHash, c.last.Hash) {
		return &Finding{Seq: ev.Seq, Reason: ReasonBrokenLink,
			Detail: fmt.Sprintf("prev_hash does not match the hash of seq %d", c.last.Seq),
			Evidence: map[string]string{
				"expected_prev_hash": hex.EncodeToString(c.last.Hash),
				"stored_prev_hash":   hex.EncodeToString(ev.PrevHash),
			},
		}, nil
	}
	digest := payloadDigest(ev.Payload)
	env, err := appendEnvelope(e.scratch[:0], ev, &digest)
	e.scratch = env
	if err != nil {
		return &Finding{Seq: ev.Seq, Reason: ReasonHashMismatch,
			Detail: "the stored fields cannot form an envelope: " + err.Error()}, nil
	}
	hash := chain.EnvelopeHash(env)
	if !bytes.Equal(hash[:], ev.Hash) {
		return &Finding{Seq: ev.Seq, Reason: ReasonHashMismatch,
			Detail: "the stored fields do not hash to the stored hash",
			Evidence: map[string]string{
				"computed_hash": hex.EncodeToString(hash[:]),
				"stored_hash":   hex.EncodeToString(ev.Hash),
			},
		}, nil
	}

	if !utf8.Valid(ev.Payload) {
		// Checked after the hash: an edited payload is a hash-mismatch; this
		// is a row someone holding the key signed as it is.
		return &Finding{Seq: ev.Seq, Reason: ReasonBadPayload,
			Detail: "the payload is not valid UTF-8 (journal payloads are UTF-8 JSON; the lake writer refuses such a row)"}, nil
	}

	isProvider := c.tenant == ProviderTenant
	var newKey *Key
	var newRevocation *Revocation
	var revokedID string
	if ev.Seq == 1 {
		if f := e.checkGenesis(c, ev, isProvider); f != nil {
			return f, nil
		}
	}
	if isProvider {
		switch ev.EventType {
		case TypeKeyIssued:
			k, f := e.keyFromEvent(ev)
			if f != nil {
				return f, nil
			}
			newKey = k
			if ev.Seq == 1 {
				// The root key signs its own issuance.
				e.keys[k.ID] = k
				newKey = nil
			}
		case TypeTenantCreated:
			t, err := parseTenantCreated(ev.Payload)
			if err != nil {
				return &Finding{Seq: ev.Seq, Reason: ReasonBadGenesis, Detail: err.Error()}, nil
			}
			if !e.opts.KeysOnly {
				e.refs[ev.Seq] = providerRef{hash: hash, tenant: t}
			}
		case TypeKeyRevoked:
			id, cuts, err := parseKeyRevoked(ev.Payload)
			if err != nil {
				return &Finding{Seq: ev.Seq, Reason: ReasonRevokedKey, Detail: err.Error()}, nil
			}
			if _, ok := e.keys[id]; !ok {
				return &Finding{Seq: ev.Seq, Reason: ReasonRevokedKey,
					Detail:   fmt.Sprintf("key.revoked names key %q, which the provider chain never issued", id),
					Evidence: map[string]string{"key_id": id}}, nil
			}
			newRevocation, revokedID = &Revocation{ProviderSeq: ev.Seq, Cuts: cuts}, id
		}
	}

	key := e.keys[ev.KeyID]
	if key == nil {
		return &Finding{Seq: ev.Seq, Reason: ReasonUnknownKey,
			Detail:   fmt.Sprintf("key %q was never issued by the provider chain", ev.KeyID),
			Evidence: map[string]string{"key_id": ev.KeyID},
		}, nil
	}
	if r, ok := e.revoked[ev.KeyID]; ok && ev.Seq > r.Point(c.tenant) {
		return &Finding{Seq: ev.Seq, Reason: ReasonRevokedKey,
			Detail: fmt.Sprintf("signed by key %s after its revocation at provider seq %d (this chain's point: seq %d)",
				ev.KeyID, r.ProviderSeq, r.Point(c.tenant)),
			Evidence: map[string]string{"key_id": ev.KeyID, "revoked_at_provider_seq": fmt.Sprint(r.ProviderSeq),
				"chain_point_seq": fmt.Sprint(r.Point(c.tenant))}}, nil
	}
	if len(ev.Signature) != ed25519.SignatureSize {
		return &Finding{Seq: ev.Seq, Reason: ReasonBadSignature,
			Detail:   fmt.Sprintf("the signature is %d bytes, not %d", len(ev.Signature), ed25519.SignatureSize),
			Evidence: map[string]string{"key_id": ev.KeyID}}, nil
	}
	if newKey != nil {
		// Usable only by later events: a key cannot sign its own issuance
		// (except the root, above).
		if _, dup := e.keys[newKey.ID]; !dup {
			e.keys[newKey.ID] = newKey
		}
	}
	if newRevocation != nil {
		// From the next event on: the revocation itself is signed by
		// another, still valid key.
		e.revoked[revokedID] = *newRevocation
	}
	c.last = Head{Seq: ev.Seq, Hash: append(c.last.Hash[:0:0], hash[:]...)}
	if !c.holding {
		e.queue(c, ev.Seq, key, env, ev.Signature)
		return nil, nil
	}
	if e.opts.KeysOnly {
		c.skipped++ // not held: a chain that does not reach the head is verified again in full
	} else {
		c.held = append(c.held, heldSig{seq: ev.Seq, key: key, env: slices.Clone(env), sig: slices.Clone(ev.Signature)})
		c.skipped = int64(len(c.held))
	}
	if ps := e.opts.ProviderSigned; ev.Seq >= ps.Seq {
		if ev.Seq == ps.Seq && bytes.Equal(hash[:], ps.Hash) {
			// Confirmed: every held event is what the earlier run verified.
			c.held, c.holding = nil, false
		} else if err := e.release(c); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// release verifies the signatures held back for ProviderSigned after all
// (the chain did not reach it intact) and stops holding; with KeysOnly,
// where none were held, it is ErrProviderUnconfirmed.
func (e *engine) release(c *chainState) error {
	if !c.holding {
		return nil
	}
	c.holding = false
	if e.opts.KeysOnly {
		return ErrProviderUnconfirmed
	}
	for _, h := range c.held {
		e.queue(c, h.seq, h.key, h.env, h.sig)
	}
	c.held, c.skipped = nil, 0
	return nil
}

func (e *engine) checkGenesis(c *chainState, ev *Event, isProvider bool) *Finding {
	if isProvider {
		if ev.EventType != TypeKeyIssued {
			return &Finding{Seq: 1, Reason: ReasonBadGenesis,
				Detail: fmt.Sprintf("the provider chain starts with %q, not %q", ev.EventType, TypeKeyIssued)}
		}
		id, _, err := parseKeyIssued(ev.Payload)
		if err != nil {
			return &Finding{Seq: 1, Reason: ReasonBadGenesis, Detail: err.Error()}
		}
		if id != ev.KeyID {
			return &Finding{Seq: 1, Reason: ReasonBadGenesis,
				Detail:   "the root key.issued is not signed by the key it issues",
				Evidence: map[string]string{"issued_key_id": id, "signing_key_id": ev.KeyID}}
		}
		if e.opts.RootKeyID != "" && id != e.opts.RootKeyID {
			return &Finding{Seq: 1, Reason: ReasonBadGenesis,
				Detail:   "the root key is not the deployment key this verifier was told to trust",
				Evidence: map[string]string{"root_key_id": id, "trusted_key_id": e.opts.RootKeyID}}
		}
		return nil
	}
	if ev.EventType != TypeTenantGenesis {
		return &Finding{Seq: 1, Reason: ReasonBadGenesis,
			Detail: fmt.Sprintf("the chain starts with %q, not %q", ev.EventType, TypeTenantGenesis)}
	}
	pseq, phash, err := parseGenesis(ev.Payload, c.tenant)
	if err != nil {
		return &Finding{Seq: 1, Reason: ReasonBadGenesis, Detail: err.Error()}
	}
	ev2 := map[string]string{
		"provider_seq":  fmt.Sprint(pseq),
		"provider_hash": hex.EncodeToString(phash),
	}
	ref, ok := e.refs[pseq]
	switch {
	case !ok:
		return &Finding{Seq: 1, Reason: ReasonBadGenesis, Evidence: ev2,
			Detail: fmt.Sprintf("the genesis references provider seq %d, which is not a verified tenant.created event", pseq)}
	case !bytes.Equal(ref.hash[:], phash):
		ev2["provider_event_hash"] = hex.EncodeToString(ref.hash[:])
		return &Finding{Seq: 1, Reason: ReasonBadGenesis, Evidence: ev2,
			Detail: fmt.Sprintf("the genesis's provider_hash is not the hash of provider seq %d", pseq)}
	case ref.tenant != c.tenant:
		ev2["created_tenant"] = ref.tenant.String()
		return &Finding{Seq: 1, Reason: ReasonBadGenesis, Evidence: ev2,
			Detail: fmt.Sprintf("provider seq %d created tenant %s, not this one", pseq, ref.tenant)}
	}
	return nil
}

func (e *engine) keyFromEvent(ev *Event) (*Key, *Finding) {
	id, pub, err := parseKeyIssued(ev.Payload)
	if err != nil {
		return nil, &Finding{Seq: ev.Seq, Reason: ReasonUnknownKey, Detail: err.Error()}
	}
	if got := KeyID(pub); id != got {
		return nil, &Finding{Seq: ev.Seq, Reason: ReasonUnknownKey,
			Detail:   "the key.issued payload's key_id is not the id of its public key",
			Evidence: map[string]string{"key_id": id, "computed_key_id": got}}
	}
	k, err := newKey(id, pub, ev.Seq)
	if err != nil {
		return nil, &Finding{Seq: ev.Seq, Reason: ReasonUnknownKey,
			Detail: fmt.Sprintf("key %s cannot be used: %v", id, err), Evidence: map[string]string{"key_id": id}}
	}
	return k, nil
}

func (e *engine) openChain(t uuid.UUID) {
	c := &chainState{tenant: t, done: make(chan struct{})}
	c.last = zeroHead()
	if t == ProviderTenant && !e.providerDone && e.opts.ProviderSigned != nil && e.opts.ProviderSigned.Seq > 0 {
		c.holding = true
	}
	if t != ProviderTenant && e.opts.Start != nil {
		if h, ok := e.opts.Start(t); ok && !h.IsZero() {
			c.from = Head{Seq: h.Seq, Hash: append([]byte(nil), h.Hash...)}
			c.last = c.from
		}
	}
	e.cur = c
}

// closeChain ends the current chain. The provider chain is a barrier: its
// signatures must all be verified before any other chain may rely on the
// keys and tenant.created events it holds.
func (e *engine) closeChain(ctx context.Context) error {
	c := e.cur
	if c == nil {
		return nil
	}
	e.cur = nil
	isProvider := c.tenant == ProviderTenant && !e.providerDone
	if isProvider {
		if err := e.release(c); err != nil { // ended before ProviderSigned: verify what was held
			return err
		}
		e.flush()
	}
	c.mu.Lock()
	c.closed = true
	e.maybeFinish(c)
	c.mu.Unlock()
	if !isProvider {
		return nil
	}
	e.providerDone = true
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Keys and tenants introduced at or after the provider chain's first
	// bad event are not trustworthy.
	if bad := c.firstBad(); bad != nil {
		for id, k := range e.keys {
			if k.IssuedSeq >= bad.Seq {
				delete(e.keys, id)
			}
		}
		for s := range e.refs {
			if s >= bad.Seq {
				delete(e.refs, s)
			}
		}
	}
	if e.opts.OnProvider != nil {
		e.opts.OnProvider(maps.Clone(e.keys), maps.Clone(e.revoked))
	}
	return nil
}

func (e *engine) finishStream(ctx context.Context) error {
	if e.cur == nil && !e.providerDone {
		return nil // empty stream
	}
	if err := e.closeChain(ctx); err != nil {
		return err
	}
	e.flush()
	// Wait for every batch: the workers drain e.work; stop() closes it.
	close(e.work)
	e.wg.Wait()
	e.work = make(chan *batch) // so the deferred stop has something to close
	return nil
}

func (e *engine) recordMissingProvider() {
	f := Finding{Tenant: ProviderTenant, Seq: 1, Reason: ReasonBadGenesis,
		Detail: "the provider chain is missing: no key was ever issued"}
	e.cbMu.Lock()
	defer e.cbMu.Unlock()
	e.summary.Chains++
	e.summary.Findings = append(e.summary.Findings, f)
	if e.opts.OnChain != nil {
		e.opts.OnChain(ChainResult{Tenant: ProviderTenant, Finding: &f})
	}
}

func (c *chainState) firstBad() *Finding {
	f := c.linkFinding
	if c.sigBad != nil && (f == nil || c.sigBad.Seq < f.Seq) {
		f = c.sigBad
	}
	return f
}

// maybeFinish reports c once it is closed and no batch holds its events.
// Caller holds c.mu.
func (e *engine) maybeFinish(c *chainState) {
	if !c.closed || c.pending > 0 || c.finished {
		return
	}
	c.finished = true
	res := ChainResult{Tenant: c.tenant, From: c.from, Last: c.last, Events: c.events, SignaturesSkipped: c.skipped}
	if f := c.firstBad(); f != nil {
		ff := *f
		res.Finding = &ff
		if f == c.sigBad {
			res.Last = c.sigLast
		}
	}
	if res.Last.Seq == 0 {
		res.Last = Head{}
	}
	e.cbMu.Lock()
	e.summary.Chains++
	e.summary.Events += c.events
	if res.Finding != nil {
		e.summary.Findings = append(e.summary.Findings, *res.Finding)
	}
	if e.opts.OnChain != nil {
		e.opts.OnChain(res)
	}
	e.cbMu.Unlock()
	close(c.done)
}

func (e *engine) queue(c *chainState, seq int64, key *Key, env, sig []byte) {
	b := e.batch
	if b == nil {
		select {
		case b = <-e.free:
		default:
			b = &batch{jobs: make([]sigJob, 0, e.opts.BatchSize), buf: make([]byte, 0, e.opts.BatchSize*160)}
		}
		e.batch = b
	}
	if n := len(b.chains); n == 0 || b.chains[n-1] != c {
		b.chains = append(b.chains, c)
		c.mu.Lock()
		c.pending++
		c.mu.Unlock()
	}
	off := len(b.buf)
	b.buf = append(b.buf, env...)
	j := sigJob{chain: c, seq: seq, key: key, off: off, end: len(b.buf)}
	copy(j.sig[:], sig)
	b.jobs = append(b.jobs, j)
	if len(b.jobs) >= e.opts.BatchSize {
		e.flush()
	}
}

func (e *engine) flush() {
	if e.batch == nil || len(e.batch.jobs) == 0 {
		return
	}
	e.work <- e.batch
	e.batch = nil
}

func (e *engine) worker() {
	defer e.wg.Done()
	bv := voi.NewBatchVerifierWithCapacity(e.opts.BatchSize)
	var valid []bool
	for b := range e.work {
		valid = e.verifyBatch(bv, b, valid[:0])
		for i, ok := range valid {
			if !ok {
				j := &b.jobs[i]
				j.chain.sigFailed(j.seq, j.key.ID, b.buf[j.off:j.end])
			}
		}
		for _, c := range b.chains {
			c.mu.Lock()
			c.pending--
			e.maybeFinish(c)
			c.mu.Unlock()
		}
		if p := e.opts.Progress; p != nil {
			p.Signatures.Add(int64(len(b.jobs)))
		}
		b.jobs, b.buf, b.chains = b.jobs[:0], b.buf[:0], b.chains[:0]
		select {
		case e.free <- b:
		default:
		}
	}
}

// verifyBatch appends one validity bit per job to valid. See
// docs/chain-verify.md "Signatures oml accepts" for why the batch verdict
// and the per-signature verdict agree.
func (e *engine) verifyBatch(bv *voi.BatchVerifier, b *batch, valid []bool) []bool {
	if e.opts.Strict {
		for i := range b.jobs {
			j := &b.jobs[i]
			valid = append(valid, verifyStrict(j.key, b.buf[j.off:j.end], j.sig[:]))
		}
		return valid
	}
	bv.Reset()
	for i := range b.jobs {
		j := &b.jobs[i]
		bv.AddExpanded(j.key.expanded, b.buf[j.off:j.end], j.sig[:])
	}
	// Verify runs the cofactored batch equation and, only if it fails,
	// checks each signature alone with the same (cofactored) equation, so
	// the bad ones are named exactly.
	_, bits := bv.Verify(nil)
	return append(valid, bits...)
}

// verifyStrict is the strict rule: crypto/ed25519 (cofactorless) accepts.
func verifyStrict(k *Key, msg, sig []byte) bool { return ed25519.Verify(k.Public, msg, sig) }

// verifyOne is the default rule for one signature (what a batch decides).
func verifyOne(k *Key, msg, sig []byte) bool { return voi.VerifyExpanded(k.expanded, msg, sig) }

func (c *chainState) sigFailed(seq int64, keyID string, env []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sigBad != nil && c.sigBad.Seq <= seq {
		return
	}
	c.sigBad = &Finding{Tenant: c.tenant, Seq: seq, Reason: ReasonBadSignature,
		Detail:   "the signature does not verify under the key the event names",
		Evidence: map[string]string{"key_id": keyID}}
	// The event passed its link check, so its prev_hash (envelope bytes
	// 29..61) is the hash of the event before it.
	c.sigLast = Head{Seq: seq - 1, Hash: append([]byte(nil), env[29:61]...)}
}

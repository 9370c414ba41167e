package bundle

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"sort"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
)

// ErrMalformed means the file is not a well-formed bundle (a usage or
// configuration problem, exit 2), as opposed to a well-formed bundle whose
// chain has findings (exit 1).
var ErrMalformed = errors.New("not a well-formed oml chain bundle")

// VerifyOptions tune VerifyFile.
type VerifyOptions struct {
	// RootKeyID pins the provider chain's root key (learned out of band).
	RootKeyID string
	// Strict verifies signatures one by one with crypto/ed25519.
	Strict bool
}

// Witness statuses.
const (
	WitnessOK       = "ok"
	WitnessFork     = "fork"      // another hash at the same seq
	WitnessTailLost = "tail-lost" // a signed head above the bundle's last event
	WitnessInvalid  = "invalid"   // unparsable, bad signature, a key never issued, another tenant
)

// WitnessResult is one signed head's verdict.
type WitnessResult struct {
	Source string `json:"source"`
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
	KeyID  string `json:"key_id"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Result is what VerifyFile found.
type Result struct {
	Header  Header  `json:"header"`
	Trailer Trailer `json:"trailer"`
	// Head is the tenant's last event whose every check passed.
	Head     chainverify.Head      `json:"-"`
	HeadSeq  int64                 `json:"head_seq"`
	HeadHash string                `json:"head_hash"`
	Events   int64                 `json:"events"`
	Findings []chainverify.Finding `json:"findings"`
	// Witnesses: every signed head in the bundle, judged.
	Witnesses []WitnessResult `json:"witnesses"`
	// Covered: the verified head is at or below a valid signed head that
	// agrees with the chain (the bundle is complete up to it).
	CoveredTo int64 `json:"covered_to_seq"`
	// RootPinned: the root key was pinned by the caller (else it is the
	// bundle's own, and a bundle made with another key proves nothing).
	RootPinned bool `json:"root_pinned"`
}

// OK reports a clean bundle: no finding and every signed head valid and
// agreeing with the chain.
func (r *Result) OK() bool {
	if len(r.Findings) > 0 {
		return false
	}
	for _, w := range r.Witnesses {
		if w.Status != WitnessOK {
			return false
		}
	}
	return true
}

// scan reads the bundle's lines, calling onEvent for each event line; it
// returns the header, the witness lines and the trailer.
func scan(r io.Reader, onEvent func(EventLine) bool) (Header, []WitnessLine, *Trailer, error) {
	var h Header
	var ws []WitnessLine
	var tr *Trailer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(line, &k); err != nil {
			return h, nil, nil, fmt.Errorf("%w: line %d is not JSON: %v", ErrMalformed, n, err)
		}
		if n == 1 && k.Kind != KindHeader {
			return h, nil, nil, fmt.Errorf("%w: line 1 is not the header", ErrMalformed)
		}
		if tr != nil {
			return h, nil, nil, fmt.Errorf("%w: line %d comes after the trailer", ErrMalformed, n)
		}
		switch k.Kind {
		case KindHeader:
			if n != 1 {
				return h, nil, nil, fmt.Errorf("%w: a second header at line %d", ErrMalformed, n)
			}
			if err := json.Unmarshal(line, &h); err != nil {
				return h, nil, nil, fmt.Errorf("%w: the header: %v", ErrMalformed, err)
			}
			if h.Format != Format || h.Version != Version {
				return h, nil, nil, fmt.Errorf("%w: format %q version %d (this oml reads %s version %d)", ErrMalformed, h.Format, h.Version, Format, Version)
			}
		case KindEvent:
			var e EventLine
			if err := json.Unmarshal(line, &e); err != nil {
				return h, nil, nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, n, err)
			}
			if onEvent != nil && !onEvent(e) {
				return h, ws, tr, nil
			}
		case KindWitness:
			var w WitnessLine
			if err := json.Unmarshal(line, &w); err != nil || w.Head == nil {
				// A garbage head is a verdict, not a reason to stop.
				w = WitnessLine{Source: "unparsable line " + fmt.Sprint(n)}
			}
			ws = append(ws, w)
		case KindTrailer:
			tr = &Trailer{}
			if err := json.Unmarshal(line, tr); err != nil {
				return h, nil, nil, fmt.Errorf("%w: the trailer: %v", ErrMalformed, err)
			}
		default:
			return h, nil, nil, fmt.Errorf("%w: line %d has unknown kind %q", ErrMalformed, n, k.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		return h, nil, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return h, ws, tr, nil
}

// VerifyFile checks the bundle at path with no database and no lake.
func VerifyFile(ctx context.Context, path string, opts VerifyOptions) (*Result, error) {
	// Pass 1: header, signed heads, trailer (events are skipped).
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	h, wls, tr, err := scan(f, nil)
	f.Close()
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("%w: no trailer: the file was cut short", ErrMalformed)
	}
	// Pass 2: every event through the verifier.
	f, err = os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var srcErr error
	events := iter.Seq2[*chainverify.Event, error](func(yield func(*chainverify.Event, error) bool) {
		_, _, _, err := scan(f, func(l EventLine) bool {
			ev, err := l.Row()
			if err != nil {
				srcErr = fmt.Errorf("%w: %v", ErrMalformed, err)
				return false
			}
			return yield(ev, nil)
		})
		if err != nil && srcErr == nil {
			srcErr = err
		}
	})
	res, counts, err := verifyStream(ctx, h, events, wls, opts)
	if srcErr != nil {
		return nil, srcErr
	}
	if err != nil {
		return nil, err
	}
	res.Trailer = *tr
	if counts.provider != tr.ProviderEvents || counts.tenant != tr.Events || len(wls) != tr.Witnesses {
		return nil, fmt.Errorf("%w: the trailer says %d provider event(s), %d event(s) and %d signed head(s), the file holds %d, %d and %d: it was cut or spliced",
			ErrMalformed, tr.ProviderEvents, tr.Events, tr.Witnesses, counts.provider, counts.tenant, len(wls))
	}
	return res, nil
}

type streamCounts struct{ provider, tenant int64 }

// verifyStream checks one tenant's chain (after the provider chain) from
// events, and the signed heads wls against it: the core of VerifyFile and
// VerifyBronze.
func verifyStream(ctx context.Context, h Header, src iter.Seq2[*chainverify.Event, error], wls []WitnessLine, opts VerifyOptions) (*Result, streamCounts, error) {
	res := &Result{Header: h, RootPinned: opts.RootKeyID != "", Findings: []chainverify.Finding{}, Witnesses: []WitnessResult{}}
	var counts streamCounts
	// Collect, on the way, the keys the provider chain issues and the
	// tenant's hashes at witnessed seqs.
	bySeq := map[int64][]int{}
	for i, w := range wls {
		if w.Head != nil {
			bySeq[w.Head.Seq] = append(bySeq[w.Head.Seq], i)
		}
	}
	hashAt := map[int64][]byte{}
	type issued struct {
		pub ed25519.PublicKey
		seq int64
	}
	keys := map[string]issued{}
	var lastTenantSeq int64
	var srcErr error
	events := iter.Seq2[*chainverify.Event, error](func(yield func(*chainverify.Event, error) bool) {
		for ev, err := range src {
			if err != nil {
				yield(nil, err)
				return
			}
			if ev.Tenant == chainverify.ProviderTenant && h.Tenant != chainverify.ProviderTenant {
				counts.provider++
			} else if ev.Tenant == h.Tenant {
				counts.tenant++
				lastTenantSeq = ev.Seq
				if _, ok := bySeq[ev.Seq]; ok {
					hashAt[ev.Seq] = append([]byte(nil), ev.Hash...)
				}
			} else {
				srcErr = fmt.Errorf("%w: an event of tenant %s among those of %s", ErrMalformed, ev.Tenant, h.Tenant)
				return
			}
			if ev.Tenant == chainverify.ProviderTenant && ev.EventType == string(journal.TypeKeyIssued) {
				if p, err := journal.Decode(journal.TypeKeyIssued, ev.Payload); err == nil {
					ki := p.(journal.KeyIssued)
					if pub, err := base64.StdEncoding.DecodeString(ki.PublicKey); err == nil && len(pub) == ed25519.PublicKeySize {
						keys[ki.KeyID] = issued{pub: pub, seq: ev.Seq}
					}
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
	})
	vopts := chainverify.Options{RootKeyID: opts.RootKeyID, Strict: opts.Strict}
	if h.Anchor != nil {
		ah, err := hex.DecodeString(h.Anchor.Hash)
		if err != nil || len(ah) != 32 {
			return nil, counts, fmt.Errorf("%w: the anchor hash is not 64 hex characters", ErrMalformed)
		}
		anchor := chainverify.Head{Seq: h.Anchor.Seq, Hash: ah}
		vopts.Start = func(t uuid.UUID) (chainverify.Head, bool) {
			if t == h.Tenant {
				return anchor, true
			}
			return chainverify.Head{}, false
		}
	}
	var tenantResult *chainverify.ChainResult
	vopts.OnChain = func(c chainverify.ChainResult) {
		if c.Tenant == h.Tenant {
			cc := c
			tenantResult = &cc
		}
	}
	sum, err := chainverify.Verify(ctx, events, vopts)
	if srcErr != nil {
		return nil, counts, srcErr
	}
	if err != nil {
		return nil, counts, err
	}
	res.Events = sum.Events
	res.Findings = append(res.Findings, sum.Findings...)
	if tenantResult != nil {
		res.Head = tenantResult.Last
		res.HeadSeq, res.HeadHash = tenantResult.Last.Seq, hex.EncodeToString(tenantResult.Last.Hash)
	}

	// Keys the verified provider chain issued: those before its first bad
	// event (nothing at or after it is trusted).
	providerBad := int64(-1)
	for _, fd := range sum.Findings {
		if fd.Tenant == chainverify.ProviderTenant && (providerBad < 0 || fd.Seq < providerBad) {
			providerBad = fd.Seq
		}
	}
	// A revoked key still vouches for heads at or below the point its
	// revocation recorded for this chain, never above it.
	trusted := func(id string, seq int64) (ed25519.PublicKey, bool) {
		k, ok := keys[id]
		if !ok || (providerBad >= 0 && k.seq >= providerBad) {
			return nil, false
		}
		if r, gone := sum.Revocations[id]; gone && seq > r.Point(h.Tenant) {
			return nil, false
		}
		return k.pub, true
	}

	for _, w := range wls {
		wr := WitnessResult{Source: w.Source, Status: WitnessOK}
		if w.Head == nil {
			wr.Status, wr.Detail = WitnessInvalid, "the signed head is not a JSON object"
			res.Witnesses = append(res.Witnesses, wr)
			continue
		}
		wh := w.Head
		wr.Seq, wr.Hash, wr.KeyID = wh.Seq, wh.Hash, wh.KeyID
		pub, ok := trusted(wh.KeyID, wh.Seq)
		switch {
		case wh.Tenant != h.Tenant:
			wr.Status, wr.Detail = WitnessInvalid, fmt.Sprintf("the head names tenant %s, not the bundle's", wh.Tenant)
		case !ok:
			wr.Status, wr.Detail = WitnessInvalid, fmt.Sprintf("signed by key %s, which the bundle's verified provider chain never issued, or revoked before this head", wh.KeyID)
		case wh.Verify(pub) != nil:
			wr.Status, wr.Detail = WitnessInvalid, fmt.Sprintf("the signature does not verify under key %s", wh.KeyID)
		case wh.HashBytes() == nil:
			wr.Status, wr.Detail = WitnessInvalid, "the head's hash is not 64 hex characters"
		case wh.Seq > lastTenantSeq:
			wr.Status = WitnessTailLost
			wr.Detail = fmt.Sprintf("a signed head at seq %d is above the bundle's last event %d: events the deployment signed are missing", wh.Seq, lastTenantSeq)
			res.Findings = append(res.Findings, chainverify.Finding{Tenant: h.Tenant, Seq: wh.Seq, Reason: chainverify.ReasonTailLost, Detail: wr.Detail,
				Evidence: map[string]string{"witness_seq": fmt.Sprint(wh.Seq), "witness_hash": wh.Hash, "bundle_last_seq": fmt.Sprint(lastTenantSeq)}})
		case wh.Seq < h.FromSeq:
			wr.Detail = "below the bundle's first event: not compared"
		case !wh.SameHash(hashAt[wh.Seq]):
			wr.Status = WitnessFork
			wr.Detail = fmt.Sprintf("the signed head at seq %d has hash %s, the bundle's event there has %s", wh.Seq, wh.Hash, hex.EncodeToString(hashAt[wh.Seq]))
			res.Findings = append(res.Findings, chainverify.Finding{Tenant: h.Tenant, Seq: wh.Seq, Reason: chainverify.ReasonFork, Detail: wr.Detail,
				Evidence: map[string]string{"witness_hash": wh.Hash, "bundle_hash": hex.EncodeToString(hashAt[wh.Seq])}})
		default:
			if wh.Seq <= res.HeadSeq && wh.Seq > res.CoveredTo {
				res.CoveredTo = wh.Seq
			}
		}
		res.Witnesses = append(res.Witnesses, wr)
	}
	sort.SliceStable(res.Findings, func(i, j int) bool {
		if res.Findings[i].Tenant != res.Findings[j].Tenant {
			return res.Findings[i].Tenant.String() < res.Findings[j].Tenant.String()
		}
		return res.Findings[i].Seq < res.Findings[j].Seq
	})
	return res, counts, nil
}

package chainverify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Anchor kinds the fork check compares the journal with.
const (
	AnchorWitness = "witness"
	AnchorBronze  = "bronze"
)

// ForkCheckResult is the fork check's verdict for the tenants that have a
// witnessed head or a bronze table.
type ForkCheckResult struct {
	// Findings holds one tail-lost or fork finding per tenant whose journal
	// disagrees with its newest witness or its newest bronze event (both
	// heads in the evidence), unless a chain.fork_accepted covers it.
	Findings []Finding
	// Witnessed maps each checked tenant to its newest trusted witness.
	Witnessed map[uuid.UUID]*witness.Head
	// Bronze maps each tenant with a non-empty bronze table to its newest
	// bronze event: the lake's second witness of the chain.
	Bronze map[uuid.UUID]bronze.Head
	// Accepted lists the disagreements a chain.fork_accepted event on the
	// provider chain accepted: listed for ever, never failing.
	Accepted []AcceptedFinding
	// BronzeProblems lists bronze tables whose newest event could not be
	// read (a data file missing, a corrupt log): that tenant is compared
	// with its witness only; reconcile and the delta check name the damage.
	BronzeProblems []error
	// Untrusted lists witnesses that were ignored because their signature
	// does not verify under an issued key (evidence of tampering with the
	// witness store; never silently trusted).
	Untrusted []error
}

// AcceptedFinding is a fork or lost tail that was accepted, with the
// acceptance that covers it.
type AcceptedFinding struct {
	Finding    Finding `json:"finding"`
	AcceptedAt int64   `json:"accepted_provider_seq"`
	Reason     string  `json:"reason"`
	By         string  `json:"by"`
}

// Forked reports whether tenant has a tail-lost or fork finding.
func (r *ForkCheckResult) Forked(tenant uuid.UUID) (*Finding, bool) {
	for i := range r.Findings {
		if r.Findings[i].Tenant == tenant {
			return &r.Findings[i], true
		}
	}
	return nil, false
}

// IssuedKeys returns the public keys the verified provider chain issued
// (key.issued events before its first bad event), for checking witness
// signatures. Not oml.signing_keys: that table is a cache the owner can
// edit, and a key only it lists was never issued by anything signed.
func IssuedKeys(ctx context.Context, q Querier) (witness.KeyLookup, error) {
	keys, revoked, err := ProviderTrust(ctx, q)
	if err != nil {
		return nil, err
	}
	return KeyLookup(keys, revoked), nil
}

// KeyLookup is the witness key lookup of a verified provider chain's keys
// and revocations (ProviderTrust, ProviderTrustSinceCheckpoint).
func KeyLookup(keys map[string]*Key, revoked map[string]Revocation) witness.KeyLookup {
	return func(id string, tenant uuid.UUID, seq int64) (ed25519.PublicKey, bool) {
		k, ok := keys[id]
		if !ok {
			return nil, false
		}
		// A revoked key still vouches for heads at or below the point the
		// revocation recorded for that chain, never for one above it.
		if r, gone := revoked[id]; gone && seq > r.Point(tenant) {
			return nil, false
		}
		return k.Public, true
	}
}

// Acceptance is one chain.fork_accepted event of the provider chain.
type Acceptance struct {
	ProviderSeq int64
	RecordedAt  time.Time
	journal.ChainForkAccepted
}

// Acceptances maps tenants to the fork acceptances on the provider chain.
type Acceptances map[uuid.UUID][]Acceptance

// Covers returns the acceptance naming (seq, hash) as a lost head of
// tenant, if any. Matching is exact: a later, different loss is never
// covered by an earlier acceptance.
func (a Acceptances) Covers(tenant uuid.UUID, h Head) (*Acceptance, bool) {
	want := hex.EncodeToString(h.Hash)
	for i := range a[tenant] {
		for _, l := range a[tenant][i].Lost {
			if l.Seq == h.Seq && l.Hash == want {
				return &a[tenant][i], true
			}
		}
	}
	return nil, false
}

// Excuses reports whether an earlier witness w no longer has to be
// extended: it was published before a fork of its tenant was accepted (the
// acceptance covers the whole history lost as of then).
func (a Acceptances) Excuses(w *witness.Head) bool {
	for _, ac := range a[w.Tenant] {
		if !w.Time.After(ac.RecordedAt) {
			return true
		}
	}
	return false
}

// CheckWitnessExtends is the rule every witness publisher applies before
// publishing h (a head read from oml.chain_heads): h must extend every
// earlier trusted witness of its tenant (witness.CheckExtends), whose
// (seq, hash) the journal must still hold, except witnesses a
// chain.fork_accepted excuses.
func CheckWitnessExtends(ctx context.Context, q Querier, st store.Store, h *witness.Head, trusted witness.KeyLookup, acc Acceptances) error {
	return witness.CheckExtends(ctx, st, h, trusted, JournalContains(q, h.Tenant), acc.Excuses)
}

// JournalContains is witness.Contains over tenant's journal: whether it
// holds hash at seq (one indexed read).
func JournalContains(q Querier, tenant uuid.UUID) witness.Contains {
	return func(ctx context.Context, seq int64, hash []byte) (bool, error) {
		stored, err := journal.EventHash(ctx, q, tenant, seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read the journal of tenant %s at seq %d: %w", tenant, seq, err)
		}
		return bytes.Equal(stored, hash), nil
	}
}

// JournalHashes are the journal's hashes at one seq per tenant, read in
// one query (ReadJournalHashes) for a publication of many heads.
type JournalHashes struct {
	q    Querier
	at   map[uuid.UUID]int64
	hash map[uuid.UUID][]byte
}

// ReadJournalHashes reads the journal's hash of each tenant at the seq at
// names.
func ReadJournalHashes(ctx context.Context, q Querier, at map[uuid.UUID]int64) (*JournalHashes, error) {
	hash, err := journal.EventHashes(ctx, q, at)
	if err != nil {
		return nil, fmt.Errorf("read the journal's hashes of %d tenants: %w", len(at), err)
	}
	return &JournalHashes{q: q, at: at, hash: hash}, nil
}

// Contains is JournalContains for tenant, answering the seq read for it
// from what was read, and any other seq from the journal.
func (j *JournalHashes) Contains(tenant uuid.UUID) witness.Contains {
	read := JournalContains(j.q, tenant)
	return func(ctx context.Context, seq int64, hash []byte) (bool, error) {
		if at, ok := j.at[tenant]; !ok || at != seq {
			return read(ctx, seq, hash)
		}
		stored, ok := j.hash[tenant]
		return ok && bytes.Equal(stored, hash), nil
	}
}

// ReadAcceptances reads every chain.fork_accepted event of the provider
// chain (it is short: keys, tenants and acceptances).
func ReadAcceptances(ctx context.Context, q Querier) (Acceptances, error) {
	rows, err := q.Query(ctx, `SELECT seq, recorded_at, payload FROM oml.journal WHERE tenant_id = $1 AND event_type = $2 ORDER BY seq`,
		ProviderTenant, string(journal.TypeChainForkAccepted))
	if err != nil {
		return nil, fmt.Errorf("read the fork acceptances of the provider chain: %w", err)
	}
	defer rows.Close()
	out := Acceptances{}
	for rows.Next() {
		var seq int64
		var at time.Time
		var payload []byte
		if err := rows.Scan(&seq, &at, &payload); err != nil {
			return nil, fmt.Errorf("read the fork acceptances of the provider chain: %w", err)
		}
		p, err := journal.Decode(journal.TypeChainForkAccepted, payload)
		if err != nil {
			// A malformed acceptance accepts nothing; chain verify reports it.
			continue
		}
		fa := p.(journal.ChainForkAccepted)
		id, _ := uuid.Parse(fa.TenantID)
		out[id] = append(out[id], Acceptance{ProviderSeq: seq, RecordedAt: at, ChainForkAccepted: fa})
	}
	return out, rows.Err()
}

// BronzeHeads reads the newest bronze event of each tenant (the provider
// too), a few tables at a time. Tenants without a bronze table are left
// out; a table that cannot be read (one table's fault: a missing data file,
// a corrupt log) is returned in problems, never failing the others.
func BronzeHeads(ctx context.Context, q Querier, st store.Store, only *uuid.UUID) (heads map[uuid.UUID]bronze.Head, problems []error, err error) {
	return bronzeHeads(ctx, q, st, only, nil)
}

// HeadReader reads one tenant's bronze head (bronze.ReadHead's contract).
type HeadReader func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error)

func bronzeHeads(ctx context.Context, q Querier, st store.Store, only *uuid.UUID, read HeadReader) (heads map[uuid.UUID]bronze.Head, problems []error, err error) {
	if read == nil {
		read = func(ctx context.Context, id uuid.UUID) (bronze.Head, bool, error) {
			return bronze.ReadHead(ctx, st, id)
		}
	}
	ids := []uuid.UUID{}
	if only != nil {
		ids = append(ids, *only)
	} else if ids, err = tenant.KnownIDs(ctx, q); err != nil {
		return nil, nil, fmt.Errorf("list the tenants to compare with bronze: %w", err)
	}
	out := make(map[uuid.UUID]bronze.Head, len(ids))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func(id uuid.UUID) {
			defer wg.Done()
			defer func() { <-sem }()
			h, ok, err := read(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && ctx.Err() != nil:
				if firstErr == nil {
					firstErr = ctx.Err()
				}
			case err != nil:
				problems = append(problems, err)
			case ok:
				out[id] = h
			}
		}(id)
	}
	wg.Wait()
	return out, problems, firstErr
}

// ForkCheck compares the journal of every tenant (or only one) with two
// witnesses kept outside PostgreSQL: the newest signed head in st and the
// newest event of the tenant's bronze.events table. A journal that does not
// reach the seq a witness saw lost its tail (tail-lost); one that holds
// another hash there forked (fork) — so a lost tail is caught whether or not
// a signed witness covered it. A disagreement that a chain.fork_accepted on
// the provider chain names exactly is listed in Accepted instead.
//
// It is cheap: per tenant, the witness listing, the bronze table's log and
// the data file(s) holding its newest seq, and two index lookups per head,
// sent for all tenants in one round trip per 5,000 heads. Bronze is
// read before the journal, so a lake writer draining meanwhile can never
// make bronze look ahead of a journal it was copied from. It is what a
// writer runs before building on a chain: `oml lake drain` must not
// materialize a tenant it reports.
func ForkCheck(ctx context.Context, q Querier, st store.Store, only *uuid.UUID) (*ForkCheckResult, error) {
	return ForkCheckWith(ctx, q, st, only, nil)
}

// ForkCheckWith is ForkCheck with the bronze heads read by read (nil:
// bronze.ReadHead): the lake writer passes heads computed from the
// snapshots it loaded anyway, so a start reads each table's log once. read
// must read bronze now, before the journal is read (see ForkCheck).
func ForkCheckWith(ctx context.Context, q Querier, st store.Store, only *uuid.UUID, read HeadReader) (*ForkCheckResult, error) {
	return ForkCheckCaching(ctx, q, st, only, read, nil)
}

// ForkCheckCaching is ForkCheckWith reading the witness keys through
// cache (nil: a full verification of the provider chain).
func ForkCheckCaching(ctx context.Context, q Querier, st store.Store, only *uuid.UUID, read HeadReader, cache *ProviderTrustCache) (*ForkCheckResult, error) {
	trusted, err := cache.issued(ctx, q)
	if err != nil {
		return nil, err
	}
	return ForkCheckTrusting(ctx, q, st, only, read, trusted)
}

// ForkCheckRemembering is ForkCheckCaching over every tenant for the
// process that publishes witnesses through pub (the lake writer's
// periodic check): a tenant whose newest listed witness is the one pub put
// last is compared with the head pub remembers, not read and verified
// again (witness.NewestRemembered).
func ForkCheckRemembering(ctx context.Context, q Querier, st store.Store, read HeadReader, cache *ProviderTrustCache, pub *witness.Publisher) (*ForkCheckResult, error) {
	trusted, err := cache.issued(ctx, q)
	if err != nil {
		return nil, err
	}
	newest, bad, err := witness.NewestRemembered(ctx, st, trusted, pub)
	if err != nil {
		return nil, err
	}
	return forkCheck(ctx, q, st, nil, read, newest, bad)
}

// ForkCheckTrusting is ForkCheckWith with the witness keys given (oml
// doctor passes KeyLookup of ProviderTrustSinceCheckpoint).
func ForkCheckTrusting(ctx context.Context, q Querier, st store.Store, only *uuid.UUID, read HeadReader, trusted witness.KeyLookup) (*ForkCheckResult, error) {
	newest, bad, err := witness.Newest(ctx, st, only, trusted)
	if err != nil {
		return nil, err
	}
	return forkCheck(ctx, q, st, only, read, newest, bad)
}

// ForkCheckCached is ForkCheckTrusting over every tenant with the
// witnesses read through the verified-witness summary
// (witness.NewestCached): only the witnesses that changed since they were
// verified, and the scrub's share, are read and verified again. For oml
// doctor, a report; never for what writes (the lake writer's fork check
// reads every witness).
func ForkCheckCached(ctx context.Context, q Querier, st store.Store, read HeadReader, trusted witness.KeyLookup, cache witness.CacheOptions) (*ForkCheckResult, witness.CacheStats, error) {
	newest, bad, stats, err := witness.NewestCached(ctx, st, trusted, cache)
	if err != nil {
		return nil, stats, err
	}
	res, err := forkCheck(ctx, q, st, nil, read, newest, bad)
	return res, stats, err
}

func forkCheck(ctx context.Context, q Querier, st store.Store, only *uuid.UUID, read HeadReader, newest map[uuid.UUID]*witness.Head, bad []error) (*ForkCheckResult, error) {
	heads, bronzeBad, err := bronzeHeads(ctx, q, st, only, read)
	if err != nil {
		return nil, err
	}
	acc, err := ReadAcceptances(ctx, q)
	if err != nil {
		return nil, err
	}
	res := &ForkCheckResult{Witnessed: newest, Bronze: heads, BronzeProblems: bronzeBad, Untrusted: bad}
	tenants := map[uuid.UUID]bool{}
	for id := range newest {
		tenants[id] = true
	}
	for id := range heads {
		tenants[id] = true
	}
	// Every anchor of every tenant is compared in a few round trips
	// (checkAnchors), then each tenant's worst disagreement is kept.
	var checks []anchorCheck
	var extras []map[string]string
	for id := range tenants {
		if w := newest[id]; w != nil {
			checks = append(checks, anchorCheck{tenant: id, kind: AnchorWitness, head: Head{Seq: w.Seq, Hash: w.HashBytes()}})
			extras = append(extras, map[string]string{
				"witness_time":              w.Time.UTC().Format("2006-01-02T15:04:05.999999Z07:00"),
				"witness_system_identifier": w.SystemIdentifier,
				"witness_timeline":          w.Timeline,
			})
		}
		if b, ok := heads[id]; ok {
			checks = append(checks, anchorCheck{tenant: id, kind: AnchorBronze, head: Head{Seq: b.Seq, Hash: b.Hash}})
			extras = append(extras, map[string]string{"bronze_table_version": fmt.Sprint(b.Version)})
		}
	}
	found, err := checkAnchors(ctx, q, checks)
	if err != nil {
		return nil, err
	}
	worst := map[uuid.UUID]*Finding{}
	keep := func(f *Finding) {
		if w := worst[f.Tenant]; w == nil || f.Seq < w.Seq {
			worst[f.Tenant] = f
		}
	}
	for i, f := range found {
		if f == nil {
			continue
		}
		for k, v := range extras[i] {
			f.Evidence[k] = v
		}
		if ac, ok := acc.Covers(f.Tenant, checks[i].head); ok {
			res.Accepted = append(res.Accepted, AcceptedFinding{Finding: *f, AcceptedAt: ac.ProviderSeq, Reason: ac.Reason, By: ac.By})
			continue
		}
		keep(f)
	}
	for id, b := range heads {
		for _, other := range b.Others {
			if bytes.Equal(other, b.Hash) {
				continue
			}
			keep(&Finding{Tenant: id, Seq: b.Seq, Reason: ReasonFork,
				Detail:   fmt.Sprintf("bronze.events holds two different events at seq %d: the lake was written from two histories", b.Seq),
				Evidence: map[string]string{"anchor": AnchorBronze, "bronze_hash": hex.EncodeToString(b.Hash), "bronze_other_hash": hex.EncodeToString(other)}})
		}
	}
	for _, f := range worst {
		res.Findings = append(res.Findings, *f)
	}
	sortFindings(res.Findings)
	return res, nil
}

// CheckAnchor compares one head known from outside the journal (kind names
// it: AnchorWitness, AnchorBronze) with tenant's journal: nil when the
// journal holds it, else the tail-lost or fork finding with both heads.
func CheckAnchor(ctx context.Context, q Querier, tenant uuid.UUID, kind string, a Head) (*Finding, error) {
	return checkAnchorQ(ctx, q, tenant, kind, a)
}

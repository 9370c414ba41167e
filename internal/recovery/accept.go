package recovery

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
)

// AcceptOptions select what AcceptFork does.
type AcceptOptions struct {
	Pool   *pgxpool.Pool
	Lake   store.Store
	Signer chain.Signer // not needed for DryRun
	Tenant uuid.UUID
	Reason string
	By     string
	// DryRun works out the acceptance and journals nothing.
	DryRun bool
}

// AcceptResult is what AcceptFork found and journalled.
type AcceptResult struct {
	Tenant uuid.UUID `json:"tenant"`
	// Lost are the heads of the lost history (witness and/or bronze).
	Lost []journal.LostHead `json:"lost"`
	// SharedSeq is the last seq the journal and bronze agree on (-1 when
	// bronze cannot tell): `oml lake repair` rewinds the tables to it.
	SharedSeq int64  `json:"shared_seq"`
	NewSeq    int64  `json:"new_seq"`
	NewHash   string `json:"new_hash"`
	// ProviderSeq is the chain.fork_accepted event's seq on the provider
	// chain (0 in a dry run or when it was already accepted).
	ProviderSeq int64 `json:"provider_seq"`
	// AlreadyAccepted: every disagreement was accepted before; nothing new
	// was journalled.
	AlreadyAccepted bool   `json:"already_accepted"`
	DryRun          bool   `json:"dry_run"`
	Reason          string `json:"reason"`
	By              string `json:"by"`
}

var (
	// ErrNothingToAccept means the tenant's journal agrees with its
	// witness and bronze heads: there is no fork or lost tail to accept.
	ErrNothingToAccept = errors.New("nothing to accept")
	// ErrRestorable means the lost tail is in bronze and nothing was
	// appended since: restore it (restore-tail) instead of accepting it.
	ErrRestorable = errors.New("the lost tail can be restored")
)

// AcceptFork journals, on the provider chain, that tenant's journal wins
// over the history its witness and/or bronze table saw (the database wrote
// over a lost tail, or the tail is lost for good). The lost heads are named
// exactly, so the fork check lists exactly them as accepted and a later,
// different loss is still a finding. A tail restore-tail can bring back is
// refused (ErrRestorable): accepting it would throw away signed events the
// lake still holds.
func AcceptFork(ctx context.Context, opts AcceptOptions) (*AcceptResult, error) {
	if !opts.DryRun && opts.Signer == nil {
		return nil, errors.New("accepting a fork journals chain.fork_accepted and needs the deployment key")
	}
	res := &AcceptResult{Tenant: opts.Tenant, DryRun: opts.DryRun, Reason: opts.Reason, By: opts.By, SharedSeq: -1, Lost: []journal.LostHead{}}
	fc, err := chainverify.ForkCheck(ctx, opts.Pool, opts.Lake, &opts.Tenant)
	if err != nil {
		return nil, err
	}
	if _, forked := fc.Forked(opts.Tenant); !forked {
		for _, a := range fc.Accepted {
			if a.Finding.Tenant == opts.Tenant {
				res.AlreadyAccepted = true
				return res, nil
			}
		}
		return nil, fmt.Errorf("%w: tenant %s's journal agrees with its witnessed head and its bronze table", ErrNothingToAccept, opts.Tenant)
	}
	keys, err := issuedKeys(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	plan, err := planTenant(ctx, opts.Pool, opts.Lake, opts.Tenant, fc.Witnessed[opts.Tenant], keys, func(uuid.UUID) bool { return false })
	if err != nil {
		return nil, err
	}
	if plan.Status == StatusRestorable {
		return nil, fmt.Errorf("%w: tenant %s lost events %d..%d, bronze holds them all and nothing was appended since: run oml chain restore-tail --tenant %s instead",
			ErrRestorable, opts.Tenant, plan.FromSeq, plan.ToSeq, opts.Tenant)
	}

	acc, err := chainverify.ReadAcceptances(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	lost := func(kind string, h chainverify.Head) error {
		f, err := chainverify.CheckAnchor(ctx, opts.Pool, opts.Tenant, kind, h)
		if err != nil || f == nil {
			return err
		}
		if _, done := acc.Covers(opts.Tenant, h); done {
			return nil
		}
		res.Lost = append(res.Lost, journal.LostHead{Source: kind, Seq: h.Seq, Hash: hex.EncodeToString(h.Hash)})
		return nil
	}
	if w := fc.Witnessed[opts.Tenant]; w != nil {
		if err := lost(chainverify.AnchorWitness, chainverify.Head{Seq: w.Seq, Hash: w.HashBytes()}); err != nil {
			return nil, err
		}
	}
	if b, ok := fc.Bronze[opts.Tenant]; ok {
		if err := lost(chainverify.AnchorBronze, chainverify.Head{Seq: b.Seq, Hash: b.Hash}); err != nil {
			return nil, err
		}
	}
	if len(res.Lost) == 0 {
		return nil, fmt.Errorf("%w: tenant %s's finding is not about a witnessed or bronze head (bronze holds two histories?): run oml chain verify", ErrNothingToAccept, opts.Tenant)
	}
	head, ok, err := journalHead(ctx, opts.Pool, opts.Tenant)
	if err != nil {
		return nil, err
	}
	if ok {
		res.NewSeq, res.NewHash = int64(head.Seq), hex.EncodeToString(head.Hash[:])
	}
	if res.SharedSeq, err = sharedSeq(ctx, opts, int64(head.Seq)); err != nil {
		return nil, err
	}
	if opts.DryRun {
		return res, nil
	}
	ev, err := journal.New(journal.ChainForkAccepted{
		TenantID: opts.Tenant.String(), Lost: res.Lost, SharedSeq: res.SharedSeq,
		NewSeq: res.NewSeq, NewHash: res.NewHash, Reason: opts.Reason, By: opts.By,
	})
	if err != nil {
		return nil, err
	}
	recs, err := chain.Append(ctx, opts.Pool, opts.Signer, journal.ProviderTenant, ev)
	if err != nil {
		return nil, fmt.Errorf("journal chain.fork_accepted on the provider chain: %w", err)
	}
	res.ProviderSeq = int64(recs[0].Seq)
	return res, nil
}

// sharedSeq is the last seq at which the journal and bronze hold the same
// event, so every earlier one agrees too (-1: bronze has no table). It
// reads bronze's (seq, hash) pairs and the journal's hashes up to the
// lower head.
func sharedSeq(ctx context.Context, opts AcceptOptions, journalSeq int64) (int64, error) {
	evs, err := bronze.Events(ctx, opts.Lake, opts.Tenant, 1)
	if err != nil {
		return 0, err
	}
	if evs == nil {
		return -1, nil
	}
	lake := map[int64][]byte{}
	for _, e := range evs {
		if _, dup := lake[e.Seq]; !dup {
			lake[e.Seq] = e.Hash
		}
	}
	rows, err := opts.Pool.Query(ctx, `SELECT seq, hash FROM oml.journal WHERE tenant_id = $1 AND seq <= $2 ORDER BY seq`, opts.Tenant, journalSeq)
	if err != nil {
		return 0, fmt.Errorf("read the journal of tenant %s: %w", opts.Tenant, err)
	}
	defer rows.Close()
	shared := int64(0)
	for rows.Next() {
		var seq int64
		var hash []byte
		if err := rows.Scan(&seq, &hash); err != nil {
			return 0, err
		}
		b, ok := lake[seq]
		if !ok || !bytes.Equal(b, hash) {
			break
		}
		shared = seq
	}
	return shared, rows.Err()
}

package recovery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

// RestoreOptions select what RestoreTail does.
type RestoreOptions struct {
	Pool *pgxpool.Pool
	Lake store.Store
	// Signer signs the chain.tail_restored events (not needed for DryRun).
	Signer chain.Signer
	// Tenant limits the restore to one chain (nil: the provider chain
	// first, then every tenant).
	Tenant *uuid.UUID
	// DryRun plans and verifies, and writes nothing.
	DryRun bool
	// By is journalled as who restored.
	By string

	// hook, set by tests (export_test.go), is called at named points inside
	// a tenant's restore transaction; an error aborts it (a crash there).
	hook func(point string) error
}

// RestoreResult is the outcome of RestoreTail, one entry per chain looked at.
type RestoreResult struct {
	Tenants []*TenantResult `json:"tenants"`
	// OutboxSeq is the outbox sequence's last value afterwards.
	OutboxSeq int64 `json:"outbox_seq"`
	DryRun    bool  `json:"dry_run"`
}

// Refused counts the tenants that could not be restored.
func (r *RestoreResult) Refused() int {
	n := 0
	for _, t := range r.Tenants {
		if t.Status == StatusRefused {
			n++
		}
	}
	return n
}

func (o *RestoreOptions) at(point string) error {
	if o.hook == nil {
		return nil
	}
	return o.hook(point)
}

// RestoreTail restores every lost tail it can (see the package doc). Each
// tenant is planned (and every bronze row verified) first; unless DryRun,
// each restorable tenant is then restored in its own transaction. Tenants
// that cannot be restored are reported with the reason, never guessed at.
func RestoreTail(ctx context.Context, opts RestoreOptions) (*RestoreResult, error) {
	if !opts.DryRun && opts.Signer == nil {
		return nil, errors.New("restoring journals chain.tail_restored and needs the deployment key")
	}
	res := &RestoreResult{DryRun: opts.DryRun}
	keys, err := issuedKeys(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	trusted := func(id string, _ uuid.UUID, _ int64) (ed25519.PublicKey, bool) { p, ok := keys[id]; return p, ok }
	newest, _, err := witness.Newest(ctx, opts.Lake, opts.Tenant, trusted)
	if err != nil {
		return nil, err
	}
	tv := &txnVersions{lake: opts.Lake, seen: map[uuid.UUID]bool{}}
	known := map[int64]bool{} // outbox seqs the lake records, of every planned tail

	var order []uuid.UUID
	if opts.Tenant != nil {
		order = []uuid.UUID{*opts.Tenant}
	} else {
		order = []uuid.UUID{journal.ProviderTenant}
	}
	done := map[uuid.UUID]bool{}
	for len(order) > 0 {
		// Plan every chain of this round before restoring any, so every
		// outbox seq the lake records is known before one is reseated.
		var round []*TenantResult
		for _, id := range order {
			done[id] = true
			r, err := planTenant(ctx, opts.Pool, opts.Lake, id, newest[id], keys, func(id uuid.UUID) bool {
				return slices.Contains(createdBy(res), id)
			})
			if err != nil {
				return nil, err
			}
			if r.plan != nil {
				for _, e := range r.plan.events {
					known[e.OutboxSeq] = true
				}
				// The silver rows the tail's events last changed record
				// their outbox seqs too.
				if r.plan.silver, err = silverIndex(ctx, opts.Lake, id); err != nil {
					return nil, err
				}
				for _, s := range r.plan.silver {
					if s.journalSeq >= r.FromSeq {
						known[s.outboxSeq] = true
					}
				}
				if r.plan.gold, err = goldIndex(ctx, opts.Lake, id, r.FromSeq); err != nil {
					return nil, err
				}
				for _, s := range r.plan.gold {
					if s > 0 {
						known[s] = true
					}
				}
				if r.plan.areas, err = areaIndex(ctx, opts.Lake, id); err != nil {
					return nil, err
				}
			}
			round = append(round, r)
		}
		// Every table of every tenant, not only the restored one's: no new
		// outbox row (a restore's own event included) may reuse a seq any
		// table's txn version covers.
		all, err := tenantIDs(ctx, opts.Pool, &RestoreResult{Tenants: append(res.Tenants, round...)})
		if err != nil {
			return nil, err
		}
		maxTxn, err := tv.maxOver(ctx, append(all, journal.ProviderTenant)...)
		if err != nil {
			return nil, err
		}
		if !opts.DryRun {
			if err := seatRound(ctx, opts.Pool, round, known, maxTxn); err != nil {
				return nil, err
			}
		}
		for _, r := range round {
			if r.Status == StatusRestorable && !opts.DryRun {
				if err := restoreTenant(ctx, opts, r, tv); err != nil {
					return nil, err
				}
			}
			res.Tenants = append(res.Tenants, r)
		}
		order = nil
		if opts.Tenant == nil {
			// After the provider chain: every tenant, including any created
			// by provider events just restored (or planned, in a dry run).
			ids, err := tenantIDs(ctx, opts.Pool, res)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				if !done[id] {
					order = append(order, id)
				}
			}
		}
	}
	if err := names(ctx, opts.Pool, res); err != nil {
		return nil, err
	}
	if err := opts.Pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox', 'seq')::regclass), 0)`).Scan(&res.OutboxSeq); err != nil {
		return nil, fmt.Errorf("read the outbox sequence: %w", err)
	}
	return res, nil
}

// tenantIDs lists every tenant: oml.tenants, chain heads, and tenants the
// planned provider tail creates.
func tenantIDs(ctx context.Context, q Querier, res *RestoreResult) ([]uuid.UUID, error) {
	known, err := tenant.KnownIDs(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list the tenants: %w", err)
	}
	ids := slices.DeleteFunc(known, func(id uuid.UUID) bool { return id == journal.ProviderTenant })
	for _, id := range createdBy(res) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	return ids, nil
}

// createdBy lists the tenants the planned (or restored) provider tail
// creates.
func createdBy(res *RestoreResult) []uuid.UUID {
	var out []uuid.UUID
	for _, r := range res.Tenants {
		if r.Tenant != journal.ProviderTenant || r.plan == nil || r.Status == StatusRefused {
			continue
		}
		for _, e := range r.plan.events {
			if e.EventType != string(journal.TypeTenantCreated) {
				continue
			}
			if p, err := journal.Decode(journal.TypeTenantCreated, e.Payload); err == nil {
				if id, err := uuid.Parse(p.(journal.TenantCreated).TenantID); err == nil {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

func names(ctx context.Context, q Querier, res *RestoreResult) error {
	m, err := tenant.Names(ctx, q)
	if err != nil {
		return err
	}
	for _, r := range res.Tenants {
		r.Name = m[r.Tenant]
		if r.Tenant == journal.ProviderTenant {
			r.Name = "provider"
		}
	}
	return nil
}

// restoreTenant restores one planned tail in one transaction, under the
// tenant's chain lock, after checking the chain did not move since it was
// planned.
func restoreTenant(ctx context.Context, opts RestoreOptions, r *TenantResult, tv *txnVersions) error {
	maxTxn, err := tv.maxOver(ctx, r.Tenant)
	if err != nil {
		return err
	}
	p := r.plan
	return pgx.BeginTxFunc(ctx, opts.Pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('oml.tenant_id', $1, true)`, r.Tenant.String()); err != nil {
			return fmt.Errorf("restore tenant %s: %w", r.Tenant, err)
		}
		if err := chain.Lock(ctx, tx, r.Tenant); err != nil {
			return err
		}
		now, ok, err := journalHead(ctx, tx, r.Tenant)
		if err != nil {
			return err
		}
		if ok != p.hasHead || now.Seq != p.head.Seq || now.Hash != p.head.Hash {
			return fmt.Errorf("tenant %s: the chain moved from seq %d to %d while the restore was planned: run oml chain restore-tail again", r.Tenant, p.head.Seq, now.Seq)
		}

		// The fold the restored events imply, by the journal's own fold:
		// the rows seatRound placed, or the database moved since.
		plan, err := foldTail(ctx, tx, r)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(plan.Outbox, p.outbox, sameOutboxRow) {
			return fmt.Errorf("tenant %s: the fold state moved while the restore was planned: run oml chain restore-tail again", r.Tenant)
		}
		seqs := p.seqs
		if err := seatsStillFree(ctx, tx, r.Tenant, p.reseated); err != nil {
			return err
		}

		if err := writeChain(ctx, tx, r.Tenant, p); err != nil {
			return err
		}
		if err := opts.at("after-journal"); err != nil {
			return err
		}
		top := maxTxn
		for _, s := range seqs {
			top = max(top, s)
		}
		if err := bumpOutboxSeq(ctx, tx, top); err != nil {
			return err
		}
		if err := plan.SetOutboxSeqs(slices.Clone(seqs)); err != nil {
			return err
		}
		var w pgx.Batch
		plan.Queue(&w)
		if err := tx.SendBatch(ctx, &w).Close(); err != nil {
			return fmt.Errorf("restore tenant %s: write the fold state and outbox rows: %w", r.Tenant, err)
		}
		if err := opts.at("after-fold"); err != nil {
			return err
		}

		last := p.events[len(p.events)-1]
		ev, err := journal.New(journal.ChainTailRestored{
			FromSeq: p.events[0].Seq, ToSeq: last.Seq, ToHash: hexOf(last.Hash), Source: "bronze",
			OutboxRows: len(plan.Outbox), BodyLost: plan.HeldWithoutBody(), By: opts.By,
		})
		if err != nil {
			return err
		}
		recs, err := chain.AppendTx(ctx, tx, opts.Signer, r.Tenant, ev)
		if err != nil {
			return fmt.Errorf("tenant %s: journal chain.tail_restored: %w", r.Tenant, err)
		}
		r.Status = StatusRestored
		r.OutboxRows, r.Reseated, r.Pending = len(plan.Outbox), len(p.reseated), p.pending
		r.BodyLost = append([]journal.ClaimRef{}, plan.HeldWithoutBody()...)
		r.RestoredSeq = int64(recs[0].Seq)
		return nil
	})
}

// writeChain inserts the verified events in seq order, as the append path
// writes them (one multi-row insert in seq order). The database checks each
// row extends the chain and moves oml.chain_heads itself (the
// journal_extends_chain trigger); writeChain then checks the head is the
// last restored event. Kept in one small function so it follows the
// append path. It inserts directly rather than through oml.append_journal,
// which takes one key id per call while a restored tail may span keys:
// restore-tail runs as the schema owner.
func writeChain(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, p *tenantPlan) error {
	n := len(p.events)
	seqs := make([]int64, n)
	prevs, hashes, sigs, payloads := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	keyIDs, types, times := make([]string, n), make([]string, n), make([]time.Time, n)
	for i, e := range p.events {
		seqs[i], prevs[i], hashes[i], sigs[i], payloads[i] = e.Seq, e.PrevHash, e.Hash, e.Signature, e.Payload
		keyIDs[i], types[i], times[i] = e.KeyID, e.EventType, e.RecordedAt
	}
	if _, err := tx.Exec(ctx, `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
	         SELECT $1, s, p, h, g, k, t, b, r
	           FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::bytea[], $6::text[], $7::text[], $8::bytea[], $9::timestamptz[])
	                AS u(s, p, h, g, k, t, b, r)
	          ORDER BY s`,
		tenant, seqs, prevs, hashes, sigs, keyIDs, types, payloads, times); err != nil {
		return fmt.Errorf("restore tenant %s: insert the journal events: %w", tenant, err)
	}
	last := p.events[n-1]
	var seq int64
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT seq, hash FROM oml.chain_heads WHERE tenant_id = $1`, tenant).Scan(&seq, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("restore tenant %s: read the chain head: %w", tenant, err)
	}
	if seq != last.Seq || !bytes.Equal(hash, last.Hash) {
		return fmt.Errorf("restore tenant %s: oml.chain_heads is at seq %d after the restore, not at the last restored event %d: run oml chain verify", tenant, seq, last.Seq)
	}
	return nil
}

// bumpOutboxSeq moves the outbox sequence to at least top, so no new row
// reuses a seq a table's txn version already covers. Sequences are not
// transactional: the move stays even if the restore rolls back, which is
// harmless (it only ever moves forward).
func bumpOutboxSeq(ctx context.Context, tx pgx.Tx, top int64) error {
	if top < 1 {
		return nil
	}
	_, err := tx.Exec(ctx, `SELECT setval(s, GREATEST($1, coalesce(pg_sequence_last_value(s), 0)))
	                          FROM (SELECT pg_get_serial_sequence('oml.outbox', 'seq')::regclass AS s) q`, top)
	if err != nil {
		return fmt.Errorf("move the outbox sequence past seq %d: %w", top, err)
	}
	return nil
}

package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/journal"
)

// AppendBeforeTrust is the append path as it was before issue 12 (the
// trust boundaries: migration 004 and after), for BenchmarkAppendEnforcement's
// "before issue 12" side only. It is AppendTx at commit 34e273b (the last
// change to the append before 004), on today's fold: the head read from
// oml.chain_heads, and the writes as the application made them itself: a
// plain INSERT of the journal rows, the head's UPDATE (or INSERT for a
// first event), then the plan's statements with every outbox row of the
// append (journal.Plan.Queue, nothing taken by oml.append_journal). The
// schema it runs against must give the application those rights back and
// have the checks dropped (the benchmark does both).
//
// Kept in a test file on purpose: the database now refuses these writes
// from the application, and nothing but the benchmark may send them.
func AppendBeforeTrust(ctx context.Context, pool *pgxpool.Pool, s Signer, tenant uuid.UUID, evs ...journal.Event) ([]Record, error) {
	return InTx(ctx, pool, func(tx pgx.Tx) ([]Record, error) {
		return appendBeforeTrustTx(ctx, tx, s, tenant, evs...)
	})
}

func appendBeforeTrustTx(ctx context.Context, tx pgx.Tx, s Signer, tenant uuid.UUID, evs ...journal.Event) ([]Record, error) {
	if len(evs) == 0 {
		return nil, ErrNoEvents
	}
	digests := make([]Hash, len(evs))
	evs = append([]journal.Event(nil), evs...)
	for i := range evs {
		var err error
		if evs[i], err = evs[i].Prepared(); err != nil {
			return nil, err
		}
		digests[i] = PayloadDigest(evs[i].Payload)
	}
	keyID := s.KeyID()

	// Round trip 1: lock, then reads (the head from oml.chain_heads).
	st := journal.NewState(tenant)
	var (
		iso     string
		head    *Head
		b       pgx.Batch
		headSeq int64
	)
	var prevTenant string
	b.Queue(`SELECT current_setting('transaction_isolation'), coalesce(current_setting('oml.tenant_id', true), ''),
	                set_config('oml.tenant_id', $1, true)`, tenant.String()).
		QueryRow(func(r pgx.Row) error { var ignored string; return r.Scan(&iso, &prevTenant, &ignored) })
	b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, LockClass, TenantLockKey(tenant))
	b.Queue(`SELECT seq, hash, updated_at FROM oml.chain_heads WHERE tenant_id = $1`, tenant).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var h Head
				var hash []byte
				if err := rows.Scan(&headSeq, &hash, &h.RecordedAt); err != nil {
					return err
				}
				if len(hash) != HashSize {
					return fmt.Errorf("chain head of tenant %s has a %d-byte hash", tenant, len(hash))
				}
				h.Seq = uint64(headSeq)
				copy(h.Hash[:], hash)
				head = &h
			}
			return rows.Err()
		})
	journal.QueueLoad(&b, st, journal.NeedsOf(keyID, evs))
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("append to tenant %s: read the chain head: %w", tenant, err)
	}
	if iso != "read committed" {
		return nil, fmt.Errorf("%w (this transaction is %s)", ErrIsolation, iso)
	}

	// Seal.
	var prev Hash
	var next uint64 = 1
	now := time.UnixMicro(time.Now().UnixMicro()).UTC()
	if head != nil {
		prev, next = head.Hash, head.Seq+1
		if now.Before(head.RecordedAt) {
			now = head.RecordedAt.UTC()
		}
	}
	recs := make([]Record, len(evs))
	applied := make([]journal.Applied, len(evs))
	for i, ev := range evs {
		env := Envelope{
			TenantID: tenant, Seq: next + uint64(i), PrevHash: prev, EventType: string(ev.Type),
			RecordedAt: now, KeyID: keyID, PayloadDigest: digests[i],
		}
		rec, err := seal(s, env, ev.Payload)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
		applied[i] = journal.Applied{Seq: rec.Seq, Hash: rec.Hash, RecordedAt: rec.RecordedAt}
		prev = rec.Hash
	}

	// Fold (pure: validates before anything is written).
	plan, err := journal.Fold(st, keyID, applied, evs)
	if err != nil {
		return nil, err
	}

	// Round trip 2: the journal rows, the head, the plan (all its outbox
	// rows among them).
	var w pgx.Batch
	n := len(recs)
	seqs := make([]int64, n)
	prevs, hashes, sigs, payloads := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	types, times := make([]string, n), make([]time.Time, n)
	for i, r := range recs {
		seqs[i] = int64(r.Seq)
		prevs[i], hashes[i], sigs[i], payloads[i] = r.PrevHash[:], r.Hash[:], r.Signature, r.Payload
		types[i], times[i] = r.EventType, r.RecordedAt
	}
	w.Queue(`INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
	         SELECT $1, s, p, h, g, $2, t, b, r
	           FROM unnest($3::bigint[], $4::bytea[], $5::bytea[], $6::bytea[], $7::text[], $8::bytea[], $9::timestamptz[])
	                AS u(s, p, h, g, t, b, r)`,
		tenant, keyID, seqs, prevs, hashes, sigs, types, payloads, times)
	last := recs[n-1]
	if head == nil {
		w.Queue(`INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at) VALUES ($1, $2, $3, $4)`,
			tenant, int64(last.Seq), last.Hash[:], last.RecordedAt)
	} else {
		w.Queue(`UPDATE oml.chain_heads SET seq = $2, hash = $3, updated_at = $4 WHERE tenant_id = $1 AND seq = $5`,
			tenant, int64(last.Seq), last.Hash[:], last.RecordedAt, headSeq).
			Exec(func(ct pgconn.CommandTag) error {
				if ct.RowsAffected() != 1 {
					return fmt.Errorf("%w: the head of tenant %s moved from seq %d during the append", ErrChainConflict, tenant, headSeq)
				}
				return nil
			})
	}
	plan.Queue(&w)
	if prevTenant != tenant.String() {
		w.Queue(`SELECT set_config('oml.tenant_id', $1, true)`, prevTenant)
	}
	if err := tx.SendBatch(ctx, &w).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "journal_pkey" {
			return nil, fmt.Errorf("%w (tenant %s, seq %d): %v", ErrChainConflict, tenant, next, err)
		}
		return nil, fmt.Errorf("append to tenant %s: %w", tenant, err)
	}
	return recs, nil
}

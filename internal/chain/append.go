package chain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/journal"
)

// LockClass is the advisory-lock class of the per-tenant chain locks
// (pg_advisory_xact_lock(LockClass, TenantLockKey(tenant))). Schema owns
// class 0x6f6d6c00; this is the next one.
const LockClass int32 = 0x6f6d6c01

// TenantLockKey is the object id of a tenant's chain lock: the first four
// bytes of SHA-256 of the tenant's 16 UUID bytes, as a big-endian int32. Two
// tenants may share a key; they then serialize against each other, which
// costs throughput but never correctness.
func TenantLockKey(t uuid.UUID) int32 {
	sum := sha256.Sum256(t[:])
	return int32(binary.BigEndian.Uint32(sum[:4]))
}

var (
	// ErrNoEvents is returned for an append of zero events.
	ErrNoEvents = errors.New("nothing to append: no events given")
	// ErrIsolation is returned when the caller's transaction is not READ
	// COMMITTED: under REPEATABLE READ or SERIALIZABLE the snapshot predates
	// the lock wait and the head read would be stale.
	ErrIsolation = errors.New("the append path needs a READ COMMITTED transaction")
	// ErrChainConflict means the journal's (tenant_id, seq) primary key or
	// the database's chain check (journal_extends_chain) refused the insert: someone appended
	// at the same seq, or the rows do not extend the chain. Under the tenant
	// lock this cannot happen; if it does, the lock discipline was broken
	// somewhere and the database has just prevented a fork.
	ErrChainConflict = errors.New("chain conflict: another event already holds this seq")
)

// Head is a chain head as stored in oml.chain_heads.
type Head struct {
	Seq        uint64
	Hash       Hash
	RecordedAt time.Time
}

// Append appends evs (one or more events of one tenant, in order) in a
// transaction of its own, committed before it returns, and returns the
// sealed records. A batch of k events takes the tenant lock once and
// commits once: use it to lift the per-tenant ceiling of one commit flush
// per event. It retries the whole transaction on serialization failures
// and deadlocks; it never retries after an unknown commit outcome.
func Append(ctx context.Context, pool *pgxpool.Pool, s Signer, tenant uuid.UUID, evs ...journal.Event) ([]Record, error) {
	return InTx(ctx, pool, func(tx pgx.Tx) ([]Record, error) {
		return AppendTx(ctx, tx, s, tenant, evs...)
	})
}

// InTx runs fn in a READ COMMITTED transaction on pool and commits it,
// retrying on serialization failures and deadlocks (fn must be safe to run
// again). Use it to append to several chains in one transaction (always
// the provider chain first, to keep a global lock order).
func InTx[T any](ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) (T, error)) (T, error) {
	const maxAttempts = 5
	var zero T
	for attempt := 1; ; attempt++ {
		var out T
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			var err error
			out, err = fn(tx)
			return err
		})
		if err == nil {
			return out, nil
		}
		if attempt >= maxAttempts || !retryable(err) {
			return zero, err
		}
		backoff := time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.IntN(5000))*time.Microsecond
		select {
		case <-ctx.Done():
			return zero, err
		case <-time.After(backoff):
		}
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// AppendTx appends evs to tenant's chain inside the caller's transaction,
// which must be READ COMMITTED. In order, it:
//
//  1. digests every payload (before taking the lock, to keep it short);
//  2. pipelines, in one round trip: the transaction-local oml.tenant_id
//     setting (for row-level security; restored to the caller's value at
//     the end), pg_advisory_xact_lock on the tenant as a statement of its
//     own, THEN the head read and the fold-state reads as later statements,
//     each with a snapshot taken after the lock was granted (lock and read
//     in one statement would read a stale head);
//  3. assigns seq = head+1.., links prev_hash, stamps recorded_at (the
//     clock, clamped so it never goes below the head's), hashes and signs;
//  4. folds the events over the loaded state (rejecting illegal
//     transitions before anything is written);
//  5. pipelines, in one round trip: the journal rows and the outbox rows
//     the plan puts first (oml.append_journal; the database checks they
//     extend the chain, that the outbox rows name them, and moves the
//     head), the fold-state writes and any other outbox rows, in event
//     order.
//
// The lock is held until the caller's transaction ends, so commit order
// equals seq order within a tenant, and so does outbox order.
func AppendTx(ctx context.Context, tx pgx.Tx, s Signer, tenant uuid.UUID, evs ...journal.Event) ([]Record, error) {
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

	// Round trip 1: lock, then reads.
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
	// The head is the journal's own last row, not oml.chain_heads: nothing
	// a role could move decides where the next event goes (and the
	// database would refuse it anyway).
	b.Queue(`SELECT seq, hash, recorded_at FROM oml.journal WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1`, tenant).
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

	// Round trip 2: write everything.
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
	// Through oml.append_journal, the one way into the journal for the job
	// roles: it checks the rows extend the chain and moves oml.chain_heads,
	// so the head is not written here. It also inserts the outbox rows of
	// these events that come first in the plan (all of them, for the
	// application's events), checked against its own arguments rather than
	// by the outbox trigger's probe of the journal; the rest go in the
	// plan's own statements.
	own := plan.TakeOwnOutbox(tenant, seqs[0], seqs[n-1])
	w.Queue(`SELECT oml.append_journal($1, $2, $3::bigint[], $4::bytea[], $5::bytea[], $6::bytea[], $7::text[], $8::bytea[], $9::timestamptz[],
	                                   $10::bigint[], $11::text[], $12::text[], $13::text[], $14::int[], $15::text[])`,
		tenant, keyID, seqs, prevs, hashes, sigs, types, payloads, times,
		own.JournalSeqs, own.Targets, own.Ops, own.ArtifactIDs, own.Versions, own.Payloads)
	plan.Queue(&w)
	// Leave the caller's tenant setting as it was (the writes above ran
	// under this tenant's row-level security context).
	if prevTenant != tenant.String() {
		w.Queue(`SELECT set_config('oml.tenant_id', $1, true)`, prevTenant)
	}
	if err := tx.SendBatch(ctx, &w).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "23505" && pe.ConstraintName == "journal_pkey" ||
			pe.Code == "23514" && pe.ConstraintName == "journal_extends_chain") {
			return nil, fmt.Errorf("%w (tenant %s, seq %d): %v", ErrChainConflict, tenant, next, err)
		}
		return nil, fmt.Errorf("append to tenant %s: %w", tenant, err)
	}
	return recs, nil
}

// ReadHead returns tenant's stored head (oml.chain_heads, which the
// database keeps equal to the journal's last row), or ok=false for a tenant
// with no events yet.
func ReadHead(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, tenant uuid.UUID) (h Head, ok bool, err error) {
	var seq int64
	var hash []byte
	err = q.QueryRow(ctx, `SELECT seq, hash, updated_at FROM oml.chain_heads WHERE tenant_id = $1`, tenant).
		Scan(&seq, &hash, &h.RecordedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, err
	}
	h.Seq = uint64(seq)
	copy(h.Hash[:], hash)
	return h, true, nil
}

// Lock takes tenant's chain lock in tx (the same lock AppendTx takes; it is
// re-entrant within a transaction). Callers that must read state and then
// append consistently (init, idempotent creates) take it first.
func Lock(ctx context.Context, tx pgx.Tx, tenant uuid.UUID) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, LockClass, TenantLockKey(tenant)); err != nil {
		return fmt.Errorf("lock the chain of tenant %s: %w", tenant, err)
	}
	return nil
}

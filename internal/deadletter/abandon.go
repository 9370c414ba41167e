package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// AbandonOptions are the attribution of an abandonment; both are journalled
// and both are required (accepting a loss for good must say who and why).
type AbandonOptions struct {
	By     string
	Reason string
}

// Abandon closes each dead letter for good, in its own transaction: one
// deadletter.abandoned event on the dead letter's tenant chain, whose fold
// marks the row abandoned. An abandoned row never reaches the lake:
// reconcile lists it as an accepted gap, doctor stops counting it, and
// re-enqueue refuses it. A dead letter already re-enqueued cannot be
// abandoned (its work is back in the outbox); one already abandoned is an
// outcome, not an error. err is non-nil only when the database cannot be
// used at all.
func Abandon(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, ids []int64, opts AbandonOptions) ([]Result, error) {
	if strings.TrimSpace(opts.By) == "" {
		return nil, errors.New("abandon needs an identity (by) to journal")
	}
	if strings.TrimSpace(opts.Reason) == "" {
		return nil, errors.New("abandon needs a reason to journal: say why this row can never be repaired")
	}
	return eachLetter(ctx, ids, func(id int64) (Result, error) { return abandonOne(ctx, pool, signer, id, opts) })
}

func alreadyAbandoned(l Letter) Result {
	r := Result{ID: l.ID, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeAlreadyAbandoned, At: l.AbandonedAt}
	if l.AbandonedSeq != nil {
		r.JournalSeq = *l.AbandonedSeq
	}
	if l.AbandonedBy != nil {
		r.By = *l.AbandonedBy
	}
	return r
}

func notAbandonable(l Letter) Result {
	r := already(l)
	r.Outcome = OutcomeFailed
	r.Error = fmt.Sprintf("dead letter %d was re-enqueued (as outbox seq %d): its work is back in the outbox, there is nothing to abandon", l.ID, r.NewOutboxSeq)
	return r
}

func abandonOne(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, id int64, opts AbandonOptions) (Result, error) {
	return underChainLock(ctx, pool, id, repairAbandon, func(tx pgx.Tx, l Letter) (Result, error) {
		res := Result{ID: id, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeAbandoned, By: opts.By}
		err := journalRepair(ctx, tx, signer, l, journal.DeadletterAbandoned{DeadLetterID: id, OutboxSeq: l.OutboxSeq, By: opts.By, Reason: opts.Reason}, &res)
		return res, err
	})
}

// repairKind is which journalled repair underChainLock makes.
type repairKind int

const (
	repairReenqueue repairKind = iota
	repairAbandon
)

// settled is the answer for a dead letter one of the repairs already
// closed: the repair asked for again is its earlier outcome, the other one
// is refused. false: the repair applies.
func settled(l Letter, kind repairKind) (Result, bool) {
	switch {
	case kind == repairAbandon && l.Abandoned:
		return alreadyAbandoned(l), true
	case kind == repairAbandon && l.Reenqueued:
		return notAbandonable(l), true
	case l.Reenqueued:
		return already(l), true
	case l.Abandoned:
		return refusedAbandoned(l), true
	}
	return Result{}, false
}

// underChainLock is one journalled repair of dead letter id: a letter it
// does not apply to is settled, asked first without a lock and again under
// the tenant's chain lock (nothing else can re-enqueue or abandon it then:
// the fold reads the dead letter after the same lock); repair journals in
// that transaction.
func underChainLock(ctx context.Context, pool *pgxpool.Pool, id int64, kind repairKind, repair func(tx pgx.Tx, l Letter) (Result, error)) (Result, error) {
	first, err := Get(ctx, pool, id)
	if errors.Is(err, ErrNotFound) {
		return Result{ID: id, Outcome: OutcomeNotFound, Error: err.Error()}, nil
	}
	if err != nil {
		return Result{ID: id}, err
	}
	if r, done := settled(first, kind); done {
		return r, nil
	}
	return chain.InTx(ctx, pool, func(tx pgx.Tx) (Result, error) {
		if err := chain.Lock(ctx, tx, first.TenantID); err != nil {
			return Result{ID: id}, err
		}
		l, err := Get(ctx, tx, id)
		if err != nil {
			return Result{ID: id}, err
		}
		if r, done := settled(l, kind); done {
			return r, nil
		}
		return repair(tx, l)
	})
}

// journalRepair appends the repair's event to the dead letter's tenant
// chain in tx and records in res where it landed.
func journalRepair(ctx context.Context, tx pgx.Tx, signer chain.Signer, l Letter, p journal.Payload, res *Result) error {
	ev, err := journal.New(p)
	if err != nil {
		return err
	}
	recs, err := chain.AppendTx(ctx, tx, signer, l.TenantID, ev)
	if err != nil {
		return fmt.Errorf("journal %s for dead letter %d: %w", ev.Type, l.ID, err)
	}
	res.JournalSeq = int64(recs[0].Seq)
	at := recs[0].RecordedAt
	res.At = &at
	return nil
}

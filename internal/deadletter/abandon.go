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

// settleAbandon is abandonOne's answer for a dead letter there is nothing
// to abandon for (nil: go on).
func settleAbandon(l Letter) *Result {
	switch {
	case l.Abandoned:
		r := alreadyAbandoned(l)
		return &r
	case l.Reenqueued:
		r := notAbandonable(l)
		return &r
	}
	return nil
}

func abandonOne(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, id int64, opts AbandonOptions) (Result, error) {
	return underChainLock(ctx, pool, id, settleAbandon, func(tx pgx.Tx, l Letter) (Result, error) {
		res := Result{ID: id, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeAbandoned, By: opts.By}
		ev, err := journal.New(journal.DeadletterAbandoned{DeadLetterID: id, OutboxSeq: l.OutboxSeq, By: opts.By, Reason: opts.Reason})
		if err != nil {
			return res, err
		}
		recs, err := chain.AppendTx(ctx, tx, signer, l.TenantID, ev)
		if err != nil {
			return res, fmt.Errorf("journal deadletter.abandoned for dead letter %d: %w", id, err)
		}
		res.JournalSeq = int64(recs[0].Seq)
		at := recs[0].RecordedAt
		res.At = &at
		return res, nil
	})
}

// underChainLock is one journalled repair of dead letter id: settle answers
// for a letter the repair does not apply to (already done, refused), asked
// first without a lock and again under the tenant's chain lock (nothing
// else can re-enqueue or abandon it then: the fold reads the dead letter
// after the same lock); repair journals in that transaction.
func underChainLock(ctx context.Context, pool *pgxpool.Pool, id int64, settle func(Letter) *Result, repair func(tx pgx.Tx, l Letter) (Result, error)) (Result, error) {
	first, err := Get(ctx, pool, id)
	if errors.Is(err, ErrNotFound) {
		return Result{ID: id, Outcome: OutcomeNotFound, Error: err.Error()}, nil
	}
	if err != nil {
		return Result{ID: id}, err
	}
	if r := settle(first); r != nil {
		return *r, nil
	}
	return chain.InTx(ctx, pool, func(tx pgx.Tx) (Result, error) {
		if err := chain.Lock(ctx, tx, first.TenantID); err != nil {
			return Result{ID: id}, err
		}
		l, err := Get(ctx, tx, id)
		if err != nil {
			return Result{ID: id}, err
		}
		if r := settle(l); r != nil {
			return *r, nil
		}
		return repair(tx, l)
	})
}

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
	first, err := Get(ctx, pool, id)
	if errors.Is(err, ErrNotFound) {
		return Result{ID: id, Outcome: OutcomeNotFound, Error: err.Error()}, nil
	}
	if err != nil {
		return Result{ID: id}, err
	}
	switch {
	case first.Abandoned:
		return alreadyAbandoned(first), nil
	case first.Reenqueued:
		return notAbandonable(first), nil
	}
	return chain.InTx(ctx, pool, func(tx pgx.Tx) (Result, error) {
		// Under the tenant's chain lock nothing else can re-enqueue or
		// abandon it (the fold reads the dead letter after the same lock).
		if err := chain.Lock(ctx, tx, first.TenantID); err != nil {
			return Result{ID: id}, err
		}
		l, err := Get(ctx, tx, id)
		if err != nil {
			return Result{ID: id}, err
		}
		switch {
		case l.Abandoned:
			return alreadyAbandoned(l), nil
		case l.Reenqueued:
			return notAbandonable(l), nil
		}
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

package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// PayloadRederivedNote is appended to the journalled reason when the
// re-enqueued payload was re-derived from the journal.
const PayloadRederivedNote = "payload re-derived from the journal (the dead-lettered payload disagreed with it)"

// ImpliedPayload derives the outbox payload the journal implies for the dead
// letter's operation (see the package doc, invariant 3). It returns nil
// when the operation has no derivation (an unknown target or op) or the
// events it needs are not in the journal.
func ImpliedPayload(ctx context.Context, q Querier, l Letter) (json.RawMessage, error) {
	src, err := readEvent(ctx, q, l.TenantID, l.JournalSeq)
	if err != nil || src == nil {
		return nil, err
	}
	switch {
	case l.Target == journal.TargetBronzeEvents && l.Op == journal.OpAppend:
		b, _ := json.Marshal(journal.BronzePayload{EventType: src.EventType})
		return b, nil
	case l.Target == journal.TargetSilverClaims && l.Op == journal.OpRetract:
		p, err := journal.Decode(journal.Type(src.EventType), src.Payload)
		if err != nil {
			return nil, nil
		}
		var rp journal.RetractPayload
		switch e := p.(type) {
		case journal.ClaimDemoted:
			rp = journal.RetractPayload{State: journal.StateDemoted, By: e.By, Reason: e.Reason}
		case journal.ClaimErased:
			rp = journal.RetractPayload{State: journal.StateErased, By: e.By, Reason: e.Reason}
		case journal.ClaimReassigned:
			rp = journal.RetractPayload{State: journal.StateReassigned, By: e.By, Reason: e.Reason}
		case journal.SimulationEnded:
			rp = journal.RetractPayload{State: journal.StateSimulationEnded, By: e.By, Reason: e.SimulationID}
		default:
			return nil, nil
		}
		b, _ := json.Marshal(rp)
		return b, nil
	case l.Target == journal.TargetSilverClaims && l.Op == journal.OpMaterialize:
		p, err := journal.Decode(journal.Type(src.EventType), src.Payload)
		if err != nil {
			return nil, nil
		}
		prom, ok := p.(journal.ClaimPromoted)
		if !ok {
			return nil, nil
		}
		// The submission event: the claim row only tells where it is.
		var subSeq int64
		err = q.QueryRow(ctx, `SELECT submitted_seq FROM oml.claims WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
			l.TenantID, prom.ArtifactID, prom.Version).Scan(&subSeq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("find the submission of %s v%d: %w", prom.ArtifactID, prom.Version, err)
		}
		sev, err := readEvent(ctx, q, l.TenantID, subSeq)
		if err != nil || sev == nil {
			return nil, err
		}
		sp, err := journal.Decode(journal.Type(sev.EventType), sev.Payload)
		if err != nil {
			return nil, nil
		}
		sub, ok := sp.(journal.ClaimSubmitted)
		if !ok || sub.ArtifactID != prom.ArtifactID || sub.Version != prom.Version {
			return nil, nil
		}
		b, _ := json.Marshal(journal.MaterializePayload{
			WorkareaID: sub.WorkareaID, Writer: sub.Writer, Principal: sub.Principal, Provenance: sub.Provenance,
			PlaintextDigest: sub.PlaintextDigest, CiphertextDigest: sub.CiphertextDigest, State: journal.StatePromoted,
			PromotedBy: prom.By, SubmittedSeq: subSeq, PromotedSeq: l.JournalSeq,
		})
		return b, nil
	}
	return nil, nil
}

// Outcome is what Reenqueue did with one dead letter.
type Outcome string

// Outcomes.
const (
	OutcomeReenqueued        Outcome = "reenqueued"
	OutcomeAlreadyReenqueued Outcome = "already-reenqueued"
	OutcomeNotFound          Outcome = "not-found"
	OutcomeFailed            Outcome = "failed"
	// OutcomeRefusedAbandoned: Reenqueue found the dead letter abandoned
	// (deadletter.abandoned) and refused it; the error says so.
	OutcomeRefusedAbandoned Outcome = "refused-abandoned"
	// OutcomeAbandoned: Abandon journalled deadletter.abandoned.
	OutcomeAbandoned Outcome = "abandoned"
	// OutcomeAlreadyAbandoned: Abandon found it abandoned already.
	OutcomeAlreadyAbandoned Outcome = "already-abandoned"
)

// Result is one dead letter's outcome.
type Result struct {
	ID        int64     `json:"id"`
	Tenant    uuid.UUID `json:"tenant_id,omitempty"`
	OutboxSeq int64     `json:"outbox_seq,omitempty"`
	Outcome   Outcome   `json:"outcome"`
	// The deadletter.reenqueued (or deadletter.abandoned) event and the new
	// outbox row (for reenqueued, and for already-reenqueued: the earlier
	// ones). At is when the event was recorded.
	JournalSeq   int64      `json:"journal_seq,omitempty"`
	NewOutboxSeq int64      `json:"new_outbox_seq,omitempty"`
	At           *time.Time `json:"reenqueued_at,omitempty"`
	By           string     `json:"by,omitempty"`
	// PayloadRederived: the dead-lettered payload disagreed with the
	// journal and was replaced by the derived one (package doc, invariant 3).
	PayloadRederived bool   `json:"payload_rederived,omitempty"`
	Error            string `json:"error,omitempty"`
}

// Options are the attribution of a re-enqueue.
type Options struct {
	By     string // who (journalled); required
	Reason string // why (journalled); optional
}

// Reenqueue re-enqueues each dead letter in its own transaction (package
// doc). It returns one Result per id, in order; err is non-nil only when the
// database cannot be used at all (then the results so far are returned).
// A dead letter that was already re-enqueued, or does not exist, is an
// outcome, not an error.
func Reenqueue(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, ids []int64, opts Options) ([]Result, error) {
	if opts.By == "" {
		return nil, errors.New("re-enqueue needs an identity (by) to journal")
	}
	return eachLetter(ctx, ids, func(id int64) (Result, error) { return reenqueueOne(ctx, pool, signer, id, opts) })
}

// eachLetter runs one dead letter's repair per id, each on its own: an
// error is that letter's failed outcome, unless ctx ended (then the results
// so far are returned with it).
func eachLetter(ctx context.Context, ids []int64, one func(id int64) (Result, error)) ([]Result, error) {
	out := make([]Result, 0, len(ids))
	for _, id := range ids {
		r, err := one(id)
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			r.Outcome, r.Error = OutcomeFailed, err.Error()
		}
		out = append(out, r)
	}
	return out, nil
}

func already(l Letter) Result {
	r := Result{ID: l.ID, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeAlreadyReenqueued, At: l.ReenqueuedAt}
	if l.ReenqueuedSeq != nil {
		r.JournalSeq = *l.ReenqueuedSeq
	}
	if l.NewOutboxSeq != nil {
		r.NewOutboxSeq = *l.NewOutboxSeq
	}
	if l.ReenqueuedBy != nil {
		r.By = *l.ReenqueuedBy
	}
	return r
}

// refusedAbandoned is Reenqueue's answer for an abandoned dead letter: a
// refusal that names the abandonment, never a new outbox row.
func refusedAbandoned(l Letter) Result {
	r := Result{ID: l.ID, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeRefusedAbandoned}
	by, why, at := "", "", "-"
	if l.AbandonedBy != nil {
		by = *l.AbandonedBy
	}
	if l.AbandonReason != nil {
		why = *l.AbandonReason
	}
	if l.AbandonedAt != nil {
		at = l.AbandonedAt.UTC().Format(time.RFC3339)
	}
	if l.AbandonedSeq != nil {
		r.JournalSeq = *l.AbandonedSeq
	}
	r.Error = fmt.Sprintf("dead letter %d was abandoned at %s by %s (journal seq %d, deadletter.abandoned: %q): it will never reach the lake and cannot be re-enqueued",
		l.ID, at, by, r.JournalSeq, why)
	return r
}

func reenqueueOne(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, id int64, opts Options) (Result, error) {
	return underChainLock(ctx, pool, id, repairReenqueue, func(tx pgx.Tx, l Letter) (Result, error) {
		res := Result{ID: id, Tenant: l.TenantID, OutboxSeq: l.OutboxSeq, Outcome: OutcomeReenqueued, By: opts.By}
		reason := opts.Reason
		implied, err := ImpliedPayload(ctx, tx, l)
		if err != nil {
			return res, err
		}
		if implied != nil {
			tag, err := tx.Exec(ctx, `UPDATE oml.dead_letter SET payload = $2::jsonb
WHERE id = $1 AND reenqueued_at IS NULL AND payload IS DISTINCT FROM $2::jsonb`, id, string(implied))
			if err != nil {
				return res, fmt.Errorf("re-derive the payload of dead letter %d: %w", id, err)
			}
			if tag.RowsAffected() == 1 {
				res.PayloadRederived = true
				if reason != "" {
					reason += "; "
				}
				reason += PayloadRederivedNote
			}
		}
		if err := journalRepair(ctx, tx, signer, l, journal.DeadletterReenqueued{DeadLetterID: id, OutboxSeq: l.OutboxSeq, By: opts.By, Reason: reason}, &res); err != nil {
			return res, err
		}
		if err := tx.QueryRow(ctx, `SELECT new_outbox_seq FROM oml.dead_letter WHERE id = $1`, id).Scan(&res.NewOutboxSeq); err != nil {
			return res, fmt.Errorf("read the new outbox seq of dead letter %d: %w", id, err)
		}
		return res, nil
	})
}

// OpenIDs lists the ids of the open (not re-enqueued) dead letters, of one
// tenant or all, oldest first: what `reenqueue --all` acts on.
func OpenIDs(ctx context.Context, q Querier, tenant *uuid.UUID) ([]int64, error) {
	ls, err := List(ctx, q, ListOptions{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids, nil
}

package recovery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tenant statuses of a restore.
const (
	// StatusIntact: bronze holds nothing above the journal head, and what
	// it holds at or below it agrees: nothing to restore.
	StatusIntact = "intact"
	// StatusRestorable: a lost tail can be restored (the plan of a dry run).
	StatusRestorable = "restorable"
	// StatusRestored: the lost tail was restored and journalled.
	StatusRestored = "restored"
	// StatusRefused: the tail cannot be restored (Problem says why): the
	// database wrote over it (a fork: accept it), bronze does not reach the
	// witness, or a bronze row failed verification.
	StatusRefused = "refused"
)

// TenantResult is one tenant's restore plan or outcome.
type TenantResult struct {
	Tenant     uuid.UUID `json:"tenant"`
	Name       string    `json:"name"`
	Status     string    `json:"status"`
	JournalSeq int64     `json:"journal_seq"`
	BronzeSeq  int64     `json:"bronze_seq"`
	WitnessSeq int64     `json:"witness_seq"`
	// FromSeq..ToSeq are the events restored (or to restore).
	FromSeq int64 `json:"from_seq,omitempty"`
	ToSeq   int64 `json:"to_seq,omitempty"`
	Events  int   `json:"events"`
	// OutboxRows the restored events imply: Applied put back at the seqs
	// the lake applied them at (Reseated of those at a seq the lake no
	// longer records exactly, see the package doc), Pending not yet applied
	// and re-enqueued at new seqs.
	OutboxRows int `json:"outbox_rows"`
	Reseated   int `json:"outbox_rows_reseated"`
	Pending    int `json:"outbox_rows_pending"`
	// BodyLost lists the claims submitted in the lost tail that were still
	// held: they come back held without their body (never in the lake).
	BodyLost []journal.ClaimRef `json:"body_lost"`
	// RestoredSeq is the seq of the chain.tail_restored event.
	RestoredSeq int64 `json:"restored_event_seq,omitempty"`
	// Problem says why the tenant was refused (a bronze row named).
	Problem string `json:"problem,omitempty"`
	// Tampered is true when a bronze row failed verification.
	Tampered bool `json:"tampered,omitempty"`

	plan *tenantPlan
}

// tenantPlan is what a restore of one tenant inserts.
type tenantPlan struct {
	head     chain.Head // the journal head the tail links to (seq 0: none)
	hasHead  bool
	events   []bronze.Event
	outboxOf map[int64]int64 // journal seq -> bronze outbox seq
	silver   map[journal.ClaimRef]silverRow
	gold     map[goldRef]int64 // the tail's gold.lineage rows in the lake (goldIndex)
	areas    map[string]int64  // gold.workareas: workarea -> last journal seq counted (areaIndex)

	// Set by seatRound (not in a dry run): the outbox rows the tail's
	// fold implies, their seqs (0: drawn new), how many of them are
	// pending, and the seqs chosen for the reseated ones.
	outbox   []journal.OutboxRow
	seqs     []int64
	pending  int
	reseated []int64
}

// issuedKeys returns the public keys the provider chain's key.issued
// events issued (not oml.signing_keys: keys are trusted because the
// provider chain issued them).
func issuedKeys(ctx context.Context, q Querier) (map[string]ed25519.PublicKey, error) {
	rows, err := q.Query(ctx, `SELECT payload FROM oml.journal WHERE tenant_id = $1 AND event_type = $2 ORDER BY seq`,
		journal.ProviderTenant, string(journal.TypeKeyIssued))
	if err != nil {
		return nil, fmt.Errorf("read the keys the provider chain issued: %w", err)
	}
	defer rows.Close()
	out := map[string]ed25519.PublicKey{}
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return nil, err
		}
		if err := addKey(out, payload); err != nil {
			return nil, fmt.Errorf("the provider chain's key.issued is unreadable (%v): run oml chain verify", err)
		}
	}
	return out, rows.Err()
}

func addKey(keys map[string]ed25519.PublicKey, payload []byte) error {
	p, err := journal.Decode(journal.TypeKeyIssued, payload)
	if err != nil {
		return err
	}
	ki := p.(journal.KeyIssued)
	pub, _ := base64.StdEncoding.DecodeString(ki.PublicKey)
	keys[ki.KeyID] = ed25519.PublicKey(pub)
	return nil
}

// journalHead reads tenant's last journal event (the chain as stored, not
// oml.chain_heads, which a restore must also put right).
func journalHead(ctx context.Context, q Querier, tenant uuid.UUID) (chain.Head, bool, error) {
	var h chain.Head
	var seq int64
	var hash []byte
	err := q.QueryRow(ctx, `SELECT seq, hash, recorded_at FROM oml.journal WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1`, tenant).
		Scan(&seq, &hash, &h.RecordedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return chain.Head{}, false, nil
	}
	if err != nil {
		return chain.Head{}, false, fmt.Errorf("read the journal head of tenant %s: %w", tenant, err)
	}
	h.Seq = uint64(seq)
	copy(h.Hash[:], hash)
	return h, true, nil
}

func journalHashAt(ctx context.Context, q Querier, tenant uuid.UUID, seq int64) ([]byte, error) {
	var hash []byte
	err := q.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, tenant, seq).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return hash, err
}

// planTenant decides what restoring tenant would do, verifying every bronze
// row it would insert. keys is extended with keys a restored provider
// key.issued issues.
//
// created reports whether a restore in the same run creates tenant (its
// tenant.created is in a planned provider tail); a tenant neither stored
// nor created cannot take a restored genesis.
func planTenant(ctx context.Context, q Querier, lake store.Store, tenant uuid.UUID, w *witness.Head, keys map[string]ed25519.PublicKey, created func(uuid.UUID) bool) (*TenantResult, error) {
	r := &TenantResult{Tenant: tenant, BodyLost: []journal.ClaimRef{}}
	head, hasHead, err := journalHead(ctx, q, tenant)
	if err != nil {
		return nil, err
	}
	r.JournalSeq = int64(head.Seq)
	if w != nil {
		r.WitnessSeq = w.Seq
	}
	// From the head itself, so the tail is seen to link to it.
	evs, err := bronze.Events(ctx, lake, tenant, max(1, int64(head.Seq)))
	if err != nil {
		return nil, err
	}
	evs, problem := dedupe(tenant, evs)
	if problem != "" {
		return refuse(r, problem), nil
	}
	if len(evs) > 0 {
		r.BronzeSeq = evs[len(evs)-1].Seq
	}
	refusef := func(format string, args ...any) (*TenantResult, error) {
		return refuse(r, fmt.Sprintf(format, args...)), nil
	}
	var tail []bronze.Event
	for _, e := range evs {
		if e.Seq > int64(head.Seq) {
			tail = append(tail, e)
			continue
		}
		// e.Seq == head.Seq: bronze must hold the journal's head event.
		if !bytes.Equal(e.Hash, head.Hash[:]) {
			return refusef("the journal holds another event at seq %d (hash %x) than bronze (hash %x): the database wrote over the lost tail; accept the fork (oml chain accept-fork) and repair the lake",
				e.Seq, head.Hash[:], e.Hash)
		}
	}
	if len(tail) == 0 {
		if r.BronzeSeq < r.JournalSeq && r.BronzeSeq > 0 {
			// Bronze is behind (not yet drained): compare what it has.
			if h, err := journalHashAt(ctx, q, tenant, r.BronzeSeq); err != nil {
				return nil, err
			} else if !bytes.Equal(h, evs[len(evs)-1].Hash) {
				return refusef("the journal holds another event at seq %d than bronze: a fork; accept it (oml chain accept-fork)", r.BronzeSeq)
			}
		}
		if w != nil && w.Seq > r.JournalSeq {
			return refusef("the witness saw seq %d but neither the journal (seq %d) nor bronze holds it: the lost events are not in the lake; accept the fork (oml chain accept-fork)", w.Seq, r.JournalSeq)
		}
		r.Status = StatusIntact
		return r, nil
	}
	if !hasHead && tenant != journal.ProviderTenant && !created(tenant) {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oml.tenants WHERE id = $1)`, tenant).Scan(&exists); err != nil {
			return nil, fmt.Errorf("look up tenant %s: %w", tenant, err)
		}
		if !exists {
			return refusef("the tenant does not exist in this database: its tenant.created was lost with the provider chain's tail, which is not being restored (restore the provider chain first, or accept the fork)")
		}
	}
	if hasHead && (len(evs) == 0 || evs[0].Seq != int64(head.Seq)) {
		return refusef("bronze does not hold the journal head (seq %d) the lost tail links to: it cannot be checked against the chain", head.Seq)
	}
	last := tail[len(tail)-1]
	if w != nil {
		switch {
		case w.Seq > last.Seq:
			return refusef("the witness saw seq %d but bronze reaches only seq %d: events %d..%d are in neither the journal nor the lake; accept the fork (oml chain accept-fork)",
				w.Seq, last.Seq, last.Seq+1, w.Seq)
		case w.Seq > int64(head.Seq):
			for _, e := range tail {
				if e.Seq == w.Seq && !w.SameHash(e.Hash) {
					return refusef("bronze holds another event at seq %d (hash %x) than the witness (%s): the lake disagrees with the signed head; investigate before restoring", w.Seq, e.Hash, w.Hash)
				}
			}
		}
	}
	if err := verifyTail(tenant, head, tail, keys); err != nil {
		return refuseTampered(r, err.Error()), nil
	}
	if problem := reenqueuedIn(tail); problem != "" {
		return refuse(r, problem), nil
	}
	r.Status = StatusRestorable
	r.FromSeq, r.ToSeq, r.Events = tail[0].Seq, last.Seq, len(tail)
	r.plan = &tenantPlan{head: head, hasHead: hasHead, events: tail, outboxOf: map[int64]int64{}}
	for _, e := range tail {
		r.plan.outboxOf[e.Seq] = e.OutboxSeq
	}
	return r, nil
}

// reenqueuedIn refuses a tail holding a deadletter.reenqueued, naming the
// first. The re-enqueue inserted a copy of the dead row at an outbox seq the
// identity drew, and the lake may have applied that copy — but the lake does
// not record which of its rows is the copy and which is a row the original
// events imply (a bronze row records one outbox seq per journal event, a
// silver row only its claim's last change), so the copy's seq, the original
// row's seq and the dead letter's new_outbox_seq cannot be put back as the
// lost primary had them. Guessing would leave an outbox the lake disagrees
// with; the way forward is the journal-wins path.
func reenqueuedIn(tail []bronze.Event) string {
	for _, e := range tail {
		if e.EventType != string(journal.TypeDeadletterReenqueued) {
			continue
		}
		what := ""
		if p, err := journal.Decode(journal.TypeDeadletterReenqueued, e.Payload); err == nil {
			d := p.(journal.DeadletterReenqueued)
			what = fmt.Sprintf(" of dead letter %d (outbox row %d)", d.DeadLetterID, d.OutboxSeq)
		}
		return fmt.Sprintf("the lost tail holds deadletter.reenqueued at seq %d%s: restore-tail cannot put back the re-enqueued outbox copy and the dead letter as the lost primary had them (the lake does not record which outbox seq the copy had); accept the fork (oml chain accept-fork --tenant %s --reason R), repair the lake (oml lake repair --tenant %s), then re-enqueue the dead letter again if it is still open (docs/runbooks/failover.md)",
			e.Seq, what, e.Tenant, e.Tenant)
	}
	return ""
}

// refuse marks r refused for problem.
func refuse(r *TenantResult, problem string) *TenantResult {
	r.Status, r.Problem = StatusRefused, problem
	return r
}

// refuseTampered is refuse for a tail that fails its signatures or links:
// tampering, not a lost history (TenantResult.Tampered).
func refuseTampered(r *TenantResult, problem string) *TenantResult {
	refuse(r, problem).Tampered = true
	return r
}

// dedupe drops exact duplicate bronze rows (the same event applied twice);
// two different events at one seq are refused.
func dedupe(tenant uuid.UUID, evs []bronze.Event) ([]bronze.Event, string) {
	out := evs[:0:0]
	for _, e := range evs {
		if n := len(out); n > 0 && out[n-1].Seq == e.Seq {
			p := out[n-1]
			if !bytes.Equal(p.Hash, e.Hash) || !bytes.Equal(p.Signature, e.Signature) || !bytes.Equal(p.Payload, e.Payload) {
				return nil, fmt.Sprintf("bronze.events of tenant %s holds two different events at seq %d (outbox seqs %d and %d): the lake was written from two histories; accept the fork (oml chain accept-fork)",
					tenant, e.Seq, p.OutboxSeq, e.OutboxSeq)
			}
			continue
		}
		out = append(out, e)
	}
	return out, ""
}

// verifyTail checks every bronze row against the chain it extends: tenant,
// seq contiguity, prev_hash link, recomputed hash, signature under an issued
// key, recorded_at never decreasing, and a canonical payload of a known
// type. The error names the first bad row.
func verifyTail(tenant uuid.UUID, head chain.Head, tail []bronze.Event, keys map[string]ed25519.PublicKey) error {
	prev, prevAt, next := head.Hash, head.RecordedAt, head.Seq+1
	for _, e := range tail {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("bronze row of tenant %s seq %d (outbox seq %d, file %s) is refused: %s",
				tenant, e.Seq, e.OutboxSeq, e.File, fmt.Sprintf(format, args...))
		}
		if e.Tenant != tenant.String() {
			return bad("it names tenant %q", e.Tenant)
		}
		if e.Seq != int64(next) {
			return bad("the chain needs seq %d next: bronze is missing events", next)
		}
		if !bytes.Equal(e.PrevHash, prev[:]) {
			return bad("its prev_hash %x is not the hash %x of seq %d", e.PrevHash, prev[:], next-1)
		}
		if len(e.Hash) != chain.HashSize {
			return bad("its hash is %d bytes", len(e.Hash))
		}
		pub, ok := keys[e.KeyID]
		if !ok {
			return bad("key %q was never issued by the provider chain", e.KeyID)
		}
		rec := chain.Record{TenantID: tenant, Seq: uint64(e.Seq), PrevHash: prev, Signature: e.Signature, KeyID: e.KeyID,
			EventType: e.EventType, Payload: e.Payload, RecordedAt: e.RecordedAt}
		copy(rec.Hash[:], e.Hash)
		if err := rec.Check(pub); err != nil {
			return bad("%v", err)
		}
		if e.RecordedAt.Before(prevAt) {
			return bad("its recorded_at %s is before the previous event's %s", e.RecordedAt.Format(time.RFC3339Nano), prevAt.Format(time.RFC3339Nano))
		}
		if _, err := (journal.Event{Type: journal.Type(e.EventType), Payload: e.Payload}).Prepared(); err != nil {
			return bad("%v", err)
		}
		if tenant == journal.ProviderTenant && e.EventType == string(journal.TypeKeyIssued) {
			if err := addKey(keys, e.Payload); err != nil {
				return bad("%v", err)
			}
		}
		prev, prevAt, next = rec.Hash, e.RecordedAt, next+1
	}
	return nil
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

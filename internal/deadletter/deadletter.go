package deadletter

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/outbox"
)

// ErrNotFound means no dead letter has the given id.
var ErrNotFound = errors.New("no such dead letter")

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Letter is one oml.dead_letter row with its tenant's name.
type Letter struct {
	ID              int64           `json:"id"`
	TenantID        uuid.UUID       `json:"tenant_id"`
	TenantName      string          `json:"tenant"`
	OutboxSeq       int64           `json:"outbox_seq"`
	JournalSeq      int64           `json:"journal_seq"`
	Target          string          `json:"target"`
	Op              string          `json:"op"`
	ArtifactID      *string         `json:"artifact_id"`
	Version         *int32          `json:"version"`
	Payload         json.RawMessage `json:"payload"`
	Attempts        int             `json:"attempts"`
	FirstFailedAt   time.Time       `json:"first_failed_at"`
	LastFailedAt    time.Time       `json:"last_failed_at"`
	Error           string          `json:"error"`
	SkippedSeq      int64           `json:"skipped_seq"`
	Reenqueued      bool            `json:"reenqueued"`
	ReenqueuedAt    *time.Time      `json:"reenqueued_at"`
	ReenqueuedSeq   *int64          `json:"reenqueued_seq"`
	NewOutboxSeq    *int64          `json:"new_outbox_seq"`
	ReenqueuedBy    *string         `json:"reenqueued_by"`
	ReenqueueReason *string         `json:"reenqueue_reason"`
	// Abandoned: closed for good by a journalled deadletter.abandoned (the
	// row will never reach the lake; reconcile lists it as an accepted gap).
	Abandoned     bool       `json:"abandoned"`
	AbandonedAt   *time.Time `json:"abandoned_at"`
	AbandonedSeq  *int64     `json:"abandoned_seq"`
	AbandonedBy   *string    `json:"abandoned_by"`
	AbandonReason *string    `json:"abandon_reason"`
}

// Open reports whether the dead letter still waits for a repair (neither
// re-enqueued nor abandoned).
func (l *Letter) Open() bool { return !l.Reenqueued && !l.Abandoned }

// Claim renders the artifact/version ("-" for rows without one).
func (l *Letter) Claim() string {
	if l.ArtifactID == nil {
		return "-"
	}
	if l.Version == nil {
		return *l.ArtifactID
	}
	return fmt.Sprintf("%s v%d", *l.ArtifactID, *l.Version)
}

const selectLetters = `
SELECT d.id, d.tenant_id, coalesce(t.name, ''), d.outbox_seq, d.journal_seq, d.target, d.op, d.artifact_id, d.version,
       d.payload::text, d.attempts, d.first_failed_at, d.last_failed_at, d.error, d.skipped_seq,
       d.reenqueued_at, d.reenqueued_seq, d.new_outbox_seq, d.reenqueued_by, d.reenqueue_reason,
       d.abandoned_at, d.abandoned_seq, d.abandoned_by, d.abandon_reason
  FROM oml.dead_letter d LEFT JOIN oml.tenants t ON t.id = d.tenant_id`

func scanLetter(row pgx.Row) (Letter, error) {
	var l Letter
	var payload string
	err := row.Scan(&l.ID, &l.TenantID, &l.TenantName, &l.OutboxSeq, &l.JournalSeq, &l.Target, &l.Op, &l.ArtifactID, &l.Version,
		&payload, &l.Attempts, &l.FirstFailedAt, &l.LastFailedAt, &l.Error, &l.SkippedSeq,
		&l.ReenqueuedAt, &l.ReenqueuedSeq, &l.NewOutboxSeq, &l.ReenqueuedBy, &l.ReenqueueReason,
		&l.AbandonedAt, &l.AbandonedSeq, &l.AbandonedBy, &l.AbandonReason)
	if err != nil {
		return l, err
	}
	l.Payload = json.RawMessage(payload)
	l.Reenqueued = l.ReenqueuedAt != nil
	l.Abandoned = l.AbandonedAt != nil
	return l, nil
}

// ListOptions filter List.
type ListOptions struct {
	Tenant *uuid.UUID // only this tenant
	Since  time.Time  // only dead letters whose first failure is at or after Since
	All    bool       // include re-enqueued (repaired) and abandoned dead letters
}

// List returns dead letters, oldest id first: by default only the open
// ones (neither re-enqueued nor abandoned).
func List(ctx context.Context, q Querier, opts ListOptions) ([]Letter, error) {
	sql := selectLetters + ` WHERE ($1::uuid IS NULL OR d.tenant_id = $1)
   AND ($2::timestamptz IS NULL OR d.first_failed_at >= $2)
   AND ($3 OR (d.reenqueued_at IS NULL AND d.abandoned_at IS NULL))
 ORDER BY d.id`
	var since *time.Time
	if !opts.Since.IsZero() {
		since = &opts.Since
	}
	rows, err := q.Query(ctx, sql, opts.Tenant, since, opts.All)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	out := []Letter{}
	for rows.Next() {
		l, err := scanLetter(rows)
		if err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// Get reads one dead letter.
func Get(ctx context.Context, q Querier, id int64) (Letter, error) {
	l, err := scanLetter(q.QueryRow(ctx, selectLetters+` WHERE d.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("%w %d: list them with `oml deadletter list --all`", ErrNotFound, id)
	}
	if err != nil {
		return l, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	return l, nil
}

// Event is a journal event as Show presents it (digest-only, as stored).
type Event struct {
	Seq        int64           `json:"seq"`
	EventType  string          `json:"event_type"`
	RecordedAt time.Time       `json:"recorded_at"`
	Hash       string          `json:"hash"`
	KeyID      string          `json:"key_id"`
	Payload    json.RawMessage `json:"payload"`
}

// OutboxRow is an outbox row as Show presents it.
type OutboxRow struct {
	Seq       int64           `json:"seq"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// Detail is everything known about one dead letter.
type Detail struct {
	Letter
	// Source is the journal event the failed outbox row came from.
	Source *Event `json:"source_event"`
	// Skipped is the materialize.skipped event that dead-lettered it.
	Skipped *Event `json:"skipped_event"`
	// ReenqueuedEvent is the deadletter.reenqueued event, once repaired.
	ReenqueuedEvent *Event `json:"reenqueued_event"`
	// Original is the outbox row as it stands now; Copy is the row the
	// re-enqueue inserted.
	Original *OutboxRow `json:"original_outbox_row"`
	Copy     *OutboxRow `json:"reenqueued_outbox_row"`
	// ImpliedPayload is the payload the journal implies for this
	// operation (nil when it cannot be derived); PayloadMatches says whether
	// the dead-lettered payload equals it.
	ImpliedPayload json.RawMessage `json:"implied_payload"`
	PayloadMatches bool            `json:"payload_matches_journal"`
	// BodyPresent / BodyDigestMatches describe the held body of a
	// materialization (nil for other rows).
	BodyPresent       *bool `json:"body_present,omitempty"`
	BodyDigestMatches *bool `json:"body_digest_matches,omitempty"`
}

// Show reads one dead letter and everything around it.
func Show(ctx context.Context, q Querier, id int64) (Detail, error) {
	l, err := Get(ctx, q, id)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Letter: l}
	if d.Source, err = readEvent(ctx, q, l.TenantID, l.JournalSeq); err != nil {
		return d, err
	}
	if d.Skipped, err = readEvent(ctx, q, l.TenantID, l.SkippedSeq); err != nil {
		return d, err
	}
	if d.Skipped == nil && l.TenantID != journal.ProviderTenant {
		// A row of a tenant that does not exist is skipped on the provider
		// chain (docs/deadletter.md).
		ev, err := readEvent(ctx, q, journal.ProviderTenant, l.SkippedSeq)
		if err != nil {
			return d, err
		}
		if ev != nil && ev.EventType == string(journal.TypeMaterializeSkipped) {
			d.Skipped = ev
		}
	}
	if l.ReenqueuedSeq != nil {
		if d.ReenqueuedEvent, err = readEvent(ctx, q, l.TenantID, *l.ReenqueuedSeq); err != nil {
			return d, err
		}
	}
	if d.Original, err = readOutbox(ctx, q, l.OutboxSeq); err != nil {
		return d, err
	}
	if l.NewOutboxSeq != nil {
		if d.Copy, err = readOutbox(ctx, q, *l.NewOutboxSeq); err != nil {
			return d, err
		}
	}
	implied, err := ImpliedPayload(ctx, q, l)
	if err != nil {
		return d, err
	}
	if implied != nil {
		d.ImpliedPayload = implied
		if err := q.QueryRow(ctx, `SELECT $1::jsonb = $2::jsonb`, string(l.Payload), string(implied)).Scan(&d.PayloadMatches); err != nil {
			return d, fmt.Errorf("compare payloads of dead letter %d: %w", id, err)
		}
	}
	if l.Op == "materialize" && l.ArtifactID != nil && l.Version != nil {
		var present, matches bool
		err := q.QueryRow(ctx, `
SELECT b.ciphertext IS NOT NULL, coalesce(sha256(b.ciphertext) = c.ciphertext_digest, false)
  FROM oml.claims c LEFT JOIN oml.claim_bodies b
    ON b.tenant_id = c.tenant_id AND b.artifact_id = c.artifact_id AND b.version = c.version
 WHERE c.tenant_id = $1 AND c.artifact_id = $2 AND c.version = $3`, l.TenantID, *l.ArtifactID, *l.Version).Scan(&present, &matches)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return d, fmt.Errorf("check the held body of dead letter %d: %w", id, err)
		}
		if err == nil {
			d.BodyPresent, d.BodyDigestMatches = &present, &matches
		}
	}
	return d, nil
}

func readEvent(ctx context.Context, q Querier, tenant uuid.UUID, seq int64) (*Event, error) {
	var e Event
	var hash, payload []byte
	err := q.QueryRow(ctx, `SELECT seq, event_type, recorded_at, hash, key_id, payload FROM oml.journal WHERE tenant_id = $1 AND seq = $2`,
		tenant, seq).Scan(&e.Seq, &e.EventType, &e.RecordedAt, &hash, &e.KeyID, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal event %s/%d: %w", tenant, seq, err)
	}
	e.Hash = hex.EncodeToString(hash)
	if json.Valid(payload) {
		e.Payload = payload
	} else {
		e.Payload, _ = json.Marshal(string(payload))
	}
	return &e, nil
}

func readOutbox(ctx context.Context, q Querier, seq int64) (*OutboxRow, error) {
	r, err := outbox.ReadPayload(ctx, q, seq)
	if err != nil {
		return nil, fmt.Errorf("read outbox row %d: %w", seq, err)
	}
	if r == nil {
		return nil, nil
	}
	return &OutboxRow{Seq: r.Seq, Payload: json.RawMessage(r.Payload), CreatedAt: r.CreatedAt}, nil
}

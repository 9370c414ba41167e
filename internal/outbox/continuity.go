package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The reads behind the lake writer's continuity check (lakewriter/
// continuity.go, doc.go invariant 7): where the database's history stands,
// and the outbox rows a batch records as its anchors. The digest an anchor
// carries is the lake format's, computed by the lake writer from these
// columns.

// Identity is where a database's history stands: its system identifier
// (kept by standbys, promotions and restores of a base backup), its
// timeline (one more after every promotion or point-in-time restore) and
// the outbox sequence's last value.
type Identity struct {
	SystemIdentifier string `json:"system_identifier"`
	Timeline         int64  `json:"timeline"`
	LastSeq          int64  `json:"last_seq"`
}

// IdentitySQL reads Identity (columns system_identifier, tli, last_seq).
// The timeline is that of the current WAL insert position
// (pg_walfile_name's first 8 hex digits): right after a promotion it is
// already the new one, where pg_control_checkpoint() still shows the old
// until the next checkpoint. Exported for the frontier cache's write (the
// lake writer's own table), which records it in the same statement.
const IdentitySQL = `SELECT (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier,
       CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END AS tli,
       coalesce(pg_sequence_last_value(pg_get_serial_sequence('oml.outbox', 'seq')::regclass), 0) AS last_seq`

// ReadIdentity reads the database's Identity.
func ReadIdentity(ctx context.Context, q RowQuerier) (Identity, error) {
	var id Identity
	if err := q.QueryRow(ctx, IdentitySQL).Scan(&id.SystemIdentifier, &id.Timeline, &id.LastSeq); err != nil {
		return id, fmt.Errorf("read the database's system identifier, timeline and outbox sequence: %w", err)
	}
	return id, nil
}

// AnchorRow is an outbox row as a batch's anchor names it: the columns that
// say what the row is, and its journal event's hash (nil when the event is
// gone though the row is there).
type AnchorRow struct {
	Seq        int64
	Tenant     uuid.UUID
	JournalSeq int64
	Target     string
	Op         string
	ArtifactID string // "" when none
	Version    int32  // 0 when none
	EventHash  []byte
}

// batchRecordSQL computes, in one round trip, what a commit of batch
// ($1, $2] records — the database's identity and the batch's anchor (the
// row with the greatest seq: two primary-key probes) — and reads the row
// at $3, the previous batch's anchor, for the check before the batch. The
// row count is not counted here (a count over 10,000 rows cost ~15 ms, a
// hundred times the rest): the cut that chose the batch already counted
// it (see the lake writer's setCutRows).
const batchRecordSQL = `
WITH r AS (SELECT max(seq) AS last FROM oml.outbox WHERE seq > $1 AND seq <= $2)
SELECT i.*,
       o.seq, o.tenant_id, o.journal_seq, o.target, o.op, coalesce(o.artifact_id, ''), coalesce(o.version, 0), j.hash,
       p.seq, p.tenant_id, p.journal_seq, p.target, p.op, coalesce(p.artifact_id, ''), coalesce(p.version, 0), pj.hash
FROM r CROSS JOIN (` + IdentitySQL + `) i
LEFT JOIN oml.outbox o ON o.seq = r.last
LEFT JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
LEFT JOIN oml.outbox p ON p.seq = $3
LEFT JOIN oml.journal pj ON pj.tenant_id = p.tenant_id AND pj.seq = p.journal_seq`

// anchorRowSQL reads the row at one seq, for checking a recorded anchor.
const anchorRowSQL = `
SELECT o.seq, o.tenant_id, o.journal_seq, o.target, o.op, coalesce(o.artifact_id, ''), coalesce(o.version, 0), j.hash
FROM oml.outbox o LEFT JOIN oml.journal j ON j.tenant_id = o.tenant_id AND j.seq = o.journal_seq
WHERE o.seq = $1`

// anchorCols receives one anchor's columns (all NULL when there is no row).
type anchorCols struct {
	seq, jseq       *int64
	tenant          *uuid.UUID
	target, op, art *string
	version         *int32
	eventHash       []byte
}

func (a *anchorCols) dest() []any {
	return []any{&a.seq, &a.tenant, &a.jseq, &a.target, &a.op, &a.art, &a.version, &a.eventHash}
}

func (a *anchorCols) row() *AnchorRow {
	if a.seq == nil {
		return nil
	}
	return &AnchorRow{Seq: *a.seq, Tenant: *a.tenant, JournalSeq: *a.jseq, Target: *a.target, Op: *a.op,
		ArtifactID: *a.art, Version: *a.version, EventHash: a.eventHash}
}

// ReadBatchRecord reads, in one statement (one snapshot), the database's
// identity, the row with the greatest seq in (start, end] (nil when there
// is none) and the row at prevSeq (nil when there is none; -1 asks for
// none).
func ReadBatchRecord(ctx context.Context, q RowQuerier, start, end, prevSeq int64) (Identity, *AnchorRow, *AnchorRow, error) {
	var id Identity
	var cur, old anchorCols
	dest := append([]any{&id.SystemIdentifier, &id.Timeline, &id.LastSeq}, cur.dest()...)
	dest = append(dest, old.dest()...)
	if err := q.QueryRow(ctx, batchRecordSQL, start, end, prevSeq).Scan(dest...); err != nil {
		return id, nil, nil, fmt.Errorf("read the continuity record of batch (%d, %d]: %w", start, end, err)
	}
	return id, cur.row(), old.row(), nil
}

// ReadAnchorRow reads the outbox row at seq with its event's hash (nil, nil
// when there is no such row). A failed read comes back unwrapped, for the
// caller to name the anchor its way.
func ReadAnchorRow(ctx context.Context, q RowQuerier, seq int64) (*AnchorRow, error) {
	var cols anchorCols
	err := q.QueryRow(ctx, anchorRowSQL, seq).Scan(cols.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cols.row(), nil
}

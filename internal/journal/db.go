package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// QueueLoad queues into b the reads that fill st for an append of events
// with needs n. The reads run after the tenant lock in the same pipeline;
// st is filled when the batch results are read (closed).
func QueueLoad(b *pgx.Batch, st *State, n Needs) {
	b.Queue(`SELECT id, name, created_at, provider_seq, provider_hash FROM oml.tenants WHERE id = $1`, st.Tenant).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r TenantRow
				if err := rows.Scan(&r.ID, &r.Name, &r.CreatedAt, &r.ProviderSeq, &r.ProviderHash); err != nil {
					return err
				}
				st.TenantRow = &r
			}
			return rows.Err()
		})
	b.Queue(`SELECT key_id, revoked_at IS NOT NULL FROM oml.signing_keys WHERE key_id = ANY($1)`, n.KeyIDs).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k SigningKey
				if err := rows.Scan(&k.KeyID, &k.Revoked); err != nil {
					return err
				}
				st.SigningKeys[k.KeyID] = k
			}
			return rows.Err()
		})
	if len(n.Artifacts) > 0 {
		b.Queue(`SELECT artifact_id, version, workarea_id, writer, principal, provenance, plaintext_digest,
		                ciphertext_digest, state, submitted_seq, submitted_at, promoted_by, promoted_seq,
		                promoted_at, updated_at, last_seq
		           FROM oml.claims WHERE tenant_id = $1 AND artifact_id = ANY($2)`, st.Tenant, n.Artifacts).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					c := &Claim{}
					if err := rows.Scan(&c.ArtifactID, &c.Version, &c.WorkareaID, &c.Writer, &c.Principal, &c.Provenance,
						&c.PlaintextDigest, &c.CiphertextDigest, &c.State, &c.SubmittedSeq, &c.SubmittedAt,
						&c.PromotedBy, &c.PromotedSeq, &c.PromotedAt, &c.UpdatedAt, &c.LastSeq); err != nil {
						return err
					}
					st.Claims[ClaimRef{c.ArtifactID, c.Version}] = c
				}
				return rows.Err()
			})
		b.Queue(`SELECT artifact_id, dek FROM oml.claim_keys WHERE tenant_id = $1 AND artifact_id = ANY($2)`, st.Tenant, n.Artifacts).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var a string
					var k []byte
					if err := rows.Scan(&a, &k); err != nil {
						return err
					}
					st.DataKeys[a] = k
				}
				return rows.Err()
			})
	}
	if len(n.OutboxSeqs) > 0 {
		// With each row, the provider-chain event its tenant's row names
		// (TenantCreatedBy decides whether the tenant is real).
		b.Queue(`SELECT o.seq, o.tenant_id, o.journal_seq, o.target, o.op, o.artifact_id, o.version, o.payload,
		                d.outbox_seq IS NOT NULL, t.provider_hash, pj.event_type, pj.hash, pj.payload
		           FROM oml.outbox o LEFT JOIN oml.dead_letter d ON d.outbox_seq = o.seq
		           LEFT JOIN oml.tenants t ON t.id = o.tenant_id
		           LEFT JOIN oml.journal pj ON pj.tenant_id = $2 AND pj.seq = t.provider_seq
		          WHERE o.seq = ANY($1)`, n.OutboxSeqs, ProviderTenant).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					o := &OutboxRow{}
					var dead bool
					var provHash, evHash, evPayload []byte
					var evType *string
					if err := rows.Scan(&o.Seq, &o.TenantID, &o.JournalSeq, &o.Target, &o.Op, &o.ArtifactID, &o.Version, &o.Payload, &dead,
						&provHash, &evType, &evHash, &evPayload); err != nil {
						return err
					}
					st.Outbox[o.Seq] = o
					st.DeadOutbox[o.Seq] = dead
					st.OutboxTenantCreated[o.Seq] = evType != nil && TenantCreatedBy(o.TenantID, provHash, *evType, evHash, evPayload)
				}
				return rows.Err()
			})
	}
	if len(n.DeadLetters) > 0 {
		b.Queue(`SELECT d.id, d.outbox_seq, d.tenant_id, d.reenqueued_at, d.abandoned_at IS NOT NULL,
       EXISTS (SELECT 1 FROM oml.chain_heads h WHERE h.tenant_id = d.tenant_id)
  FROM oml.dead_letter d WHERE d.id = ANY($1)`, n.DeadLetters).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					d := &DeadLetter{}
					if err := rows.Scan(&d.ID, &d.OutboxSeq, &d.TenantID, &d.ReenqueuedAt, &d.Abandoned, &d.TenantHasChain); err != nil {
						return err
					}
					d.Reenqueued = d.ReenqueuedAt != nil
					st.DeadLetters[d.ID] = d
				}
				return rows.Err()
			})
	}
}

// Queue appends the plan's writes to b, in an order that keeps outbox seq
// order equal to event order: steps (outbox runs and special statements) in
// event order, then the claim rows, bodies and data keys (which no outbox
// row depends on at insert time).
func (p *Plan) Queue(b *pgx.Batch) {
	next := 0 // index into p.Outbox of the step's first row
	for _, s := range p.steps {
		if s.outbox != nil {
			if p.outboxSeqs == nil {
				queueOutbox(b, s.outbox)
			} else {
				queueOutboxAt(b, s.outbox, p.outboxSeqs[next:next+len(s.outbox)])
			}
			next += len(s.outbox)
			continue
		}
		st := *s.stmt
		b.Queue(st.sql, st.args...).Exec(func(ct pgconn.CommandTag) error {
			if st.wantRows >= 0 && ct.RowsAffected() != st.wantRows {
				return fmt.Errorf("%w: %s: expected %d row(s), changed %d", ErrRejected, st.what, st.wantRows, ct.RowsAffected())
			}
			return nil
		})
	}
	var fresh []*Claim
	for _, ref := range p.claimOrder {
		if c := p.claims[ref]; c.isNew {
			fresh = append(fresh, c)
		} else {
			queueClaimUpdate(b, p.tenant, c)
		}
	}
	if len(fresh) > 0 {
		queueClaimInserts(b, p.tenant, fresh)
	}
	if len(p.bodies) > 0 {
		arts := make([]string, len(p.bodies))
		vers := make([]int32, len(p.bodies))
		bodies := make([][]byte, len(p.bodies))
		for i, r := range p.bodies {
			arts[i], vers[i], bodies[i] = r.ref.ArtifactID, int32(r.ref.Version), r.body
		}
		b.Queue(`INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext)
		         SELECT $1, a, v, c FROM unnest($2::text[], $3::int[], $4::bytea[]) AS u(a, v, c)`,
			p.tenant, arts, vers, bodies)
	}
	var arts []string
	var deks [][]byte
	for _, a := range p.keyOrder {
		if k, ok := p.keyInserts[a]; ok {
			arts, deks = append(arts, a), append(deks, k)
		}
	}
	if len(arts) > 0 {
		b.Queue(`INSERT INTO oml.claim_keys (tenant_id, artifact_id, dek, created_at)
		         SELECT $1, a, k, now() FROM unnest($2::text[], $3::bytea[]) AS u(a, k)`, p.tenant, arts, deks)
	}
	if len(p.keyDeletes) > 0 {
		b.Queue(`DELETE FROM oml.claim_keys WHERE tenant_id = $1 AND artifact_id = ANY($2)`, p.tenant, p.keyDeletes)
	}
}

// OwnOutbox is the outbox rows an append's journal insert writes itself
// (oml.append_journal's outbox arrays, one element per row; the rows'
// tenant is the append's), as TakeOwnOutbox takes them from a plan. The
// slices are never nil, so they bind as empty arrays, not NULL.
type OwnOutbox struct {
	JournalSeqs []int64
	Targets     []string
	Ops         []string
	ArtifactIDs []*string
	Versions    []*int32
	Payloads    []string
}

// TakeOwnOutbox removes from the plan's writes, and returns, the outbox
// rows oml.append_journal may insert with the journal rows of this append
// (its seqs from..to of tenant): the plan's first step when it is a run of
// plain outbox rows (nothing to be written before them but the journal
// rows), all naming events of the append, and no seq fixed
// (SetOutboxSeqs). Otherwise it takes nothing and Queue writes every row
// as before. p.Outbox is unchanged. Those rows skip the database's
// per-statement outbox check (outbox_names_journal_event): the function
// checks them against its own arguments instead.
func (p *Plan) TakeOwnOutbox(tenant uuid.UUID, from, to int64) OwnOutbox {
	own := OwnOutbox{JournalSeqs: []int64{}, Targets: []string{}, Ops: []string{}, ArtifactIDs: []*string{},
		Versions: []*int32{}, Payloads: []string{}}
	if p.outboxSeqs != nil || len(p.steps) == 0 || p.steps[0].outbox == nil {
		return own
	}
	rows := p.steps[0].outbox
	for _, r := range rows {
		if r.TenantID != tenant || r.JournalSeq < from || r.JournalSeq > to {
			return own
		}
	}
	c := outboxColumnsOf(rows)
	own = OwnOutbox{JournalSeqs: c.jseqs, Targets: c.targets, Ops: c.ops, ArtifactIDs: c.arts, Versions: c.vers, Payloads: c.payloads}
	p.steps = p.steps[1:]
	return own
}

// queueOutbox inserts rows in one statement; ORDER BY ordinality makes the
// identity draw seqs in the rows' order.
// outboxColumns are outbox rows as the column arrays the unnest inserts
// take.
type outboxColumns struct {
	tenants  []uuid.UUID
	jseqs    []int64
	targets  []string
	ops      []string
	arts     []*string
	vers     []*int32
	payloads []string
}

func outboxColumnsOf(rows []OutboxRow) outboxColumns {
	n := len(rows)
	c := outboxColumns{tenants: make([]uuid.UUID, n), jseqs: make([]int64, n), targets: make([]string, n),
		ops: make([]string, n), arts: make([]*string, n), vers: make([]*int32, n), payloads: make([]string, n)}
	for i, r := range rows {
		c.tenants[i], c.jseqs[i], c.targets[i], c.ops[i], c.arts[i] = r.TenantID, r.JournalSeq, r.Target, r.Op, r.ArtifactID
		if r.Version != nil {
			v := int32(*r.Version)
			c.vers[i] = &v
		}
		c.payloads[i] = string(r.Payload)
	}
	return c
}

func queueOutbox(b *pgx.Batch, rows []OutboxRow) {
	c := outboxColumnsOf(rows)
	want := int64(len(rows))
	b.Queue(`INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
	         SELECT t, j, g, o, a, v, p::jsonb
	           FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[])
	                WITH ORDINALITY AS u(t, j, g, o, a, v, p, ord)
	          ORDER BY ord`,
		c.tenants, c.jseqs, c.targets, c.ops, c.arts, c.vers, c.payloads).Exec(func(ct pgconn.CommandTag) error {
		if ct.RowsAffected() != want {
			return fmt.Errorf("outbox insert wrote %d rows, expected %d", ct.RowsAffected(), want)
		}
		return nil
	})
}

// queueOutboxAt inserts rows at the given seqs: runs of fixed seqs with
// OVERRIDING SYSTEM VALUE, runs of 0 from the identity, in row order.
func queueOutboxAt(b *pgx.Batch, rows []OutboxRow, seqs []int64) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && (seqs[j] > 0) == (seqs[i] > 0) {
			j++
		}
		if seqs[i] == 0 {
			queueOutbox(b, rows[i:j])
		} else {
			queueOutboxFixed(b, rows[i:j], seqs[i:j])
		}
		i = j
	}
}

func queueOutboxFixed(b *pgx.Batch, rows []OutboxRow, seqs []int64) {
	c := outboxColumnsOf(rows)
	want := int64(len(rows))
	b.Queue(`INSERT INTO oml.outbox (seq, tenant_id, journal_seq, target, op, artifact_id, version, payload)
	         OVERRIDING SYSTEM VALUE
	         SELECT s, t, j, g, o, a, v, p::jsonb
	           FROM unnest($1::bigint[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
	                WITH ORDINALITY AS u(s, t, j, g, o, a, v, p, ord)
	          ORDER BY ord`,
		seqs, c.tenants, c.jseqs, c.targets, c.ops, c.arts, c.vers, c.payloads).Exec(func(ct pgconn.CommandTag) error {
		if ct.RowsAffected() != want {
			return fmt.Errorf("outbox insert wrote %d rows, expected %d", ct.RowsAffected(), want)
		}
		return nil
	})
}

// queueClaimInserts inserts new claims (as folded: a batch may already have
// promoted or retired them) in one statement.
func queueClaimInserts(b *pgx.Batch, tenant uuid.UUID, cs []*Claim) {
	n := len(cs)
	arts, works, writers, principals, provs, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	vers := make([]int32, n)
	pds, cds := make([][]byte, n), make([][]byte, n)
	subSeqs, lastSeqs, promSeqs := make([]int64, n), make([]int64, n), make([]*int64, n)
	subAts, updAts, promAts := make([]time.Time, n), make([]time.Time, n), make([]*time.Time, n)
	promBys := make([]*string, n)
	for i, c := range cs {
		arts[i], vers[i], works[i], writers[i], principals[i], provs[i] = c.ArtifactID, int32(c.Version), c.WorkareaID, c.Writer, c.Principal, c.Provenance
		pds[i], cds[i], states[i] = c.PlaintextDigest, c.CiphertextDigest, c.State
		subSeqs[i], subAts[i], promBys[i], promSeqs[i], promAts[i] = c.SubmittedSeq, c.SubmittedAt, c.PromotedBy, c.PromotedSeq, c.PromotedAt
		updAts[i], lastSeqs[i] = c.UpdatedAt, c.LastSeq
	}
	b.Queue(`INSERT INTO oml.claims (tenant_id, artifact_id, version, workarea_id, writer, principal, provenance,
	             plaintext_digest, ciphertext_digest, state, submitted_seq, submitted_at, promoted_by,
	             promoted_seq, promoted_at, updated_at, last_seq)
	         SELECT $1, a, v, w, wr, p, pv, pd, cd, st, ss, sa, pb, ps, pa, ua, ls
	           FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[],
	                       $9::bytea[], $10::text[], $11::bigint[], $12::timestamptz[], $13::text[], $14::bigint[],
	                       $15::timestamptz[], $16::timestamptz[], $17::bigint[])
	                AS u(a, v, w, wr, p, pv, pd, cd, st, ss, sa, pb, ps, pa, ua, ls)`,
		tenant, arts, vers, works, writers, principals, provs, pds, cds, states, subSeqs, subAts, promBys, promSeqs,
		promAts, updAts, lastSeqs)
}

func queueClaimUpdate(b *pgx.Batch, tenant uuid.UUID, c *Claim) {
	b.Queue(`UPDATE oml.claims SET state = $4, promoted_by = $5, promoted_seq = $6, promoted_at = $7,
	                updated_at = $8, last_seq = $9
	          WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
		tenant, c.ArtifactID, c.Version, c.State, c.PromotedBy, c.PromotedSeq, c.PromotedAt, c.UpdatedAt, c.LastSeq).
		Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != 1 {
				return fmt.Errorf("claim %s v%d vanished during the append", c.ArtifactID, c.Version)
			}
			return nil
		})
}

// CountBodyLost counts the claims in state body_lost (held claims whose
// body a failover lost: chain.tail_restored named them), over every tenant
// the querier may see. Status surfaces show it; it is a permanent record,
// not a fault.
func CountBodyLost(ctx context.Context, q Querier) (int64, error) {
	rows, err := q.Query(ctx, `SELECT count(*) FROM oml.claims WHERE state = $1`, StateBodyLost)
	if err != nil {
		return 0, fmt.Errorf("count the body_lost claims: %w", err)
	}
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("count the body_lost claims: %w", err)
	}
	return n, nil
}

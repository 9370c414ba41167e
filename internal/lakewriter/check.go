package lakewriter

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// The row check: every outbox row is checked against the signed journal
// event it cites before it can enter the lake, because the outbox is
// written by the application role and the lake must not trust it
// (docs/lake-writer.md, "Every row is checked against the journal").
//
//   - Its tenant must be one the provider chain created (an oml.tenants row
//     whose provider event is the tenant.created naming it). A row of any
//     other tenant id is a ghost: poison, dead-lettered on the provider
//     chain, since that tenant has no chain of its own.
//   - The cited event must exist and its stored columns must hash to its
//     stored hash (the bronze row is built from exactly those columns).
//   - bronze.events append: the payload's event_type is the event's.
//   - silver.claims materialize: the event is the claim.promoted of that
//     claim; the payload's submitted_seq is the claim.submitted of the same
//     claim, earlier, by another identity than the promoter; and the
//     payload (attribution, digests, state, seqs) is exactly what those two
//     events imply. The held body must then hash to the journalled
//     ciphertext digest (decodeItem), so no held body reaches silver
//     without a promotion in the journal. A body_lost claim (its body lost
//     with a failover's tail) has no claim.promoted — the fold refuses one —
//     so a materialize row naming it fails here as poison.
//   - silver.claims retract: the event retracts that claim, and the payload
//     is exactly what the event implies.
//   - gold.lineage (lineage.go) and gold.workareas (workareas.go, the same
//     payload): the event makes the change the row describes to that
//     claim, and the row's submission and previous change are events of
//     the same claim that imply its attribution and its state before
//     (journal.ImpliedLineage); the payload is exactly that.
//   - After a prune: a row is poison when it cites an event whose rows of
//     its table `oml outbox prune` deleted, and was inserted after them
//     (checkPruned): the original was applied, and the copy check below
//     can no longer see it.
//   - Once: a row is poison when an earlier outbox row of the same implied
//     identity (tenant, journal_seq, target, op, artifact, version) is not
//     dead-lettered, because that row is in the lake or goes there first
//     (in this batch, at a smaller seq). The database refuses such a copy
//     from the job roles (outbox_implied_once); this catches one planted
//     behind it. A re-enqueued dead letter's copy passes: its original is
//     dead-lettered and so never in the lake. The answer depends only on
//     the outbox and the dead letters, which a replayed batch sees alike
//     (dead letters only grow, and a table with a poison row commits only
//     once that row is dead-lettered), so a replay stays idempotent.
//
// Anything else is poison (the row's own fault): retried within its budget,
// then journalled and dead-lettered; never an outage and never a lake row.
//
// Cost: the cited event arrives with the batch query; the tenants are
// checked once per process (one query for the tenants a batch brings that
// are not known yet), and the submissions of a batch's materializations are
// read with one query per batch, and so are the submissions and previous
// changes of a batch's lineage rows. Signatures are not verified here (that is
// `oml chain verify`, at ~30 µs an event it would halve the drain rate);
// hashes are (~1 µs).

// rowChecker remembers which tenants the provider chain created. A tenant's
// creation never changes, so a verified tenant stays verified; a tenant
// that is not (yet) verified is asked about again with the next batch.
type rowChecker struct {
	mu      sync.Mutex
	created map[uuid.UUID]bool
}

func newRowChecker() *rowChecker { return &rowChecker{created: map[uuid.UUID]bool{}} }

type eventKey struct {
	tenant uuid.UUID
	seq    int64
}

// check runs the row check over a decoded batch, setting poison (and ghost)
// on the rows that fail it.
func (c *rowChecker) check(ctx context.Context, q querier, items []*item) error {
	if err := c.checkTenants(ctx, q, items); err != nil {
		return err
	}
	hashes := map[eventKey]error{}
	var mats, lins []*item
	for _, it := range items {
		if it.poison != nil || it.ev == nil {
			continue
		}
		k := eventKey{it.ev.tenant, it.ev.seq}
		herr, seen := hashes[k]
		if !seen {
			herr = it.ev.checkHash()
			hashes[k] = herr
		}
		if herr != nil {
			it.poison = poisonf(it.seq, "%v", herr)
			continue
		}
		switch {
		case it.table.Kind == tables.Bronze:
			if it.bronze == nil || it.bronze.EventType != it.ev.eventType {
				it.poison = poisonf(it.seq, "bronze.events payload does not name the type %s of journal event %d", it.ev.eventType, it.ev.seq)
			}
		case it.table.Kind == tables.Gold || it.table.Kind == tables.Workareas:
			if it.lin != nil {
				lins = append(lins, it)
			}
		case it.mat != nil:
			mats = append(mats, it)
		case it.ret != nil:
			it.poison = checkRetract(it)
		}
	}
	if err := checkMaterializations(ctx, q, mats); err != nil {
		return err
	}
	if err := checkLineage(ctx, q, lins); err != nil {
		return err
	}
	if err := checkOnce(ctx, q, items); err != nil {
		return err
	}
	if err := checkPruned(ctx, q, items); err != nil {
		return err
	}
	for _, it := range items {
		it.shed()
	}
	return nil
}

// checkPruned marks the rows that cite an event whose rows of the table
// `oml outbox prune` deleted, inserted after that prune: a copy of a row
// already applied, which outbox_implied_once and checkOnce can no longer
// see (the original is gone). One query per batch, a probe of the small
// oml.outbox_pruned per row.
//
// The rule (the mark is oml.outbox_pruned's through_seq and
// through_journal_seq, raised in the prune's own transaction): a row with
// seq above through_seq citing an event at or below through_journal_seq
// did not come from its event's append, which inserts a table's rows in
// event order. A re-enqueued dead letter's copy is judged by the row it
// copies (a legitimate dead-lettered row kept inside the pruned prefix
// passes; the re-enqueue of a refused forgery does not). Rows re-derived
// from the journal (seq 0) are not outbox rows and are not checked here.
func checkPruned(ctx context.Context, q querier, items []*item) error {
	seqs, bySeq := outboxSeqs(items, func(it *item) bool { return it.poison == nil && !it.derived })
	if len(seqs) == 0 {
		return nil
	}
	copies, err := outbox.PrunedCopies(ctx, q, seqs)
	if err != nil {
		return err
	}
	for _, c := range copies {
		if it := bySeq[c.Seq]; it != nil {
			it.poison = poisonf(c.Seq, "outbox row %d cites journal event %d, whose rows of %s were applied and then pruned (oml outbox prune, through event %d and outbox seq %d), yet it was inserted after them: a copy, not its event's row; the journal implies the row once",
				c.Seq, it.journalSeq, it.target, c.ThroughJournalSeq, c.ThroughSeq)
		}
	}
	return nil
}

// outboxSeqs lists the seqs of the items keep accepts, and indexes them.
func outboxSeqs(items []*item, keep func(*item) bool) ([]int64, map[int64]*item) {
	var seqs []int64
	bySeq := map[int64]*item{}
	for _, it := range items {
		if keep(it) {
			seqs = append(seqs, it.seq)
			bySeq[it.seq] = it
		}
	}
	return seqs, bySeq
}

// checkOnce marks the rows that copy an earlier outbox row of the same
// implied identity which is not dead-lettered (one query per batch:
// outbox.EarlierCopies).
func checkOnce(ctx context.Context, q querier, items []*item) error {
	seqs, bySeq := outboxSeqs(items, func(it *item) bool { return it.poison == nil })
	if len(seqs) == 0 {
		return nil
	}
	first, err := outbox.EarlierCopies(ctx, q, seqs)
	if err != nil {
		return err
	}
	for seq, f := range first {
		if it := bySeq[seq]; it != nil {
			it.poison = poisonf(seq, "outbox row %d copies row %d (same tenant, journal event %d, target, op and claim), which is not dead-lettered: the journal implies the row once",
				seq, f, it.journalSeq)
		}
	}
	return nil
}

// checkTenants marks the rows of tenants the provider chain did not create.
func (c *rowChecker) checkTenants(ctx context.Context, q querier, items []*item) error {
	c.mu.Lock()
	var ask []uuid.UUID
	asked := map[uuid.UUID]bool{}
	for _, it := range items {
		t := it.table.Tenant
		if !c.created[t] && !asked[t] {
			asked[t] = true
			ask = append(ask, t)
		}
	}
	c.mu.Unlock()
	if len(ask) > 0 {
		rows, err := q.Query(ctx, `
SELECT t.id, t.provider_hash, pj.event_type, pj.hash, pj.payload,
       pj.prev_hash, pj.key_id, pj.recorded_at, pj.seq
FROM oml.tenants t
JOIN oml.journal pj ON pj.tenant_id = $2 AND pj.seq = t.provider_seq
WHERE t.id = ANY($1)`, ask, journal.ProviderTenant)
		if err != nil {
			return fmt.Errorf("check the tenants of outbox rows against the provider chain: %w", err)
		}
		found := map[uuid.UUID]bool{}
		for rows.Next() {
			var id uuid.UUID
			var provHash []byte
			ev := event{tenant: journal.ProviderTenant}
			if err := rows.Scan(&id, &provHash, &ev.eventType, &ev.hash, &ev.payload, &ev.prevHash, &ev.keyID, &ev.recordedAt, &ev.seq); err != nil {
				rows.Close()
				return fmt.Errorf("check the tenants of outbox rows against the provider chain: %w", err)
			}
			if ev.checkHash() == nil && journal.TenantCreatedBy(id, provHash, ev.eventType, ev.hash, ev.payload) {
				found[id] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("check the tenants of outbox rows against the provider chain: %w", err)
		}
		c.mu.Lock()
		for id := range found {
			c.created[id] = true
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		if !c.created[it.table.Tenant] {
			it.ghost = true
			it.poison = poisonf(it.seq, "tenant %s does not exist: no tenant.created on the provider chain names it", it.table.Tenant)
		}
	}
	return nil
}

// checkHash recomputes the event's hash from its stored columns.
func (ev *event) checkHash() error {
	if len(ev.prevHash) != chain.HashSize || len(ev.hash) != chain.HashSize {
		return fmt.Errorf("journal event %s/%d has a malformed hash or prev_hash", ev.tenant, ev.seq)
	}
	r := chain.Record{TenantID: ev.tenant, Seq: uint64(ev.seq), EventType: ev.eventType, RecordedAt: ev.recordedAt,
		KeyID: ev.keyID, Payload: ev.payload}
	copy(r.PrevHash[:], ev.prevHash)
	enc, err := r.Envelope().Encode()
	if err != nil {
		return fmt.Errorf("journal event %s/%d cannot form an envelope: %v", ev.tenant, ev.seq, err)
	}
	if h := chain.EnvelopeHash(enc); !bytes.Equal(h[:], ev.hash) {
		return fmt.Errorf("journal event %s/%d does not hash to its stored hash (it was edited or forged)", ev.tenant, ev.seq)
	}
	return nil
}

func checkRetract(it *item) error {
	p, err := journal.Decode(journal.Type(it.ev.eventType), it.ev.payload)
	if err != nil {
		return poisonf(it.seq, "journal event %d cannot retract %s v%d: %v", it.ev.seq, it.artifact, it.version, err)
	}
	want, err := journal.ImpliedRetract(p, it.artifact, int(it.version))
	if err != nil {
		return poisonf(it.seq, "retract of %s v%d is not what journal event %d says: %v", it.artifact, it.version, it.ev.seq, err)
	}
	if want != *it.ret {
		return poisonf(it.seq, "retract payload of %s v%d differs from what journal event %d implies (%s by %q)",
			it.artifact, it.version, it.ev.seq, want.State, want.By)
	}
	return nil
}

// checkMaterializations checks each materialization against its promotion
// (the cited event) and its submission (read for the whole batch at once).
func checkMaterializations(ctx context.Context, q querier, mats []*item) error {
	if len(mats) == 0 {
		return nil
	}
	proms := make([]journal.ClaimPromoted, len(mats))
	var tenants []pgtype.UUID
	var seqs []int64
	for i, it := range mats {
		// A plain decode (not journal.Decode's strict one, which costs
		// several times more): every field used is compared with the row.
		var prom journal.ClaimPromoted
		switch {
		case it.ev.eventType != string(journal.TypeClaimPromoted) || plainJSON(it.ev.payload, &prom) != nil:
			it.poison = poisonf(it.seq, "journal event %d is a %s, not the claim.promoted a materialization needs", it.ev.seq, it.ev.eventType)
		case prom.ArtifactID != it.artifact || prom.Version != int(it.version):
			it.poison = poisonf(it.seq, "journal event %d promotes %s v%d, not %s v%d", it.ev.seq, prom.ArtifactID, prom.Version, it.artifact, it.version)
		default:
			proms[i] = prom
			tenants = append(tenants, pgtype.UUID{Bytes: it.ev.tenant, Valid: true})
			seqs = append(seqs, it.mat.SubmittedSeq)
		}
	}
	subs, err := readEvents(ctx, q, tenants, seqs)
	if err != nil {
		return err
	}
	for i, it := range mats {
		if it.poison != nil {
			continue
		}
		it.poison = checkMaterialization(it, proms[i], subs[eventKey{it.ev.tenant, it.mat.SubmittedSeq}])
	}
	return nil
}

func checkMaterialization(it *item, prom journal.ClaimPromoted, sub *event) error {
	if sub == nil {
		return poisonf(it.seq, "materialization of %s v%d names submission journal seq %d, which does not exist", it.artifact, it.version, it.mat.SubmittedSeq)
	}
	if err := sub.checkHash(); err != nil {
		return poisonf(it.seq, "%v", err)
	}
	var s journal.ClaimSubmitted
	if sub.eventType != string(journal.TypeClaimSubmitted) || plainJSON(sub.payload, &s) != nil {
		return poisonf(it.seq, "materialization of %s v%d names journal seq %d as its submission, but that is a %s", it.artifact, it.version, sub.seq, sub.eventType)
	}
	want, err := journal.ImpliedMaterialize(s, sub.seq, prom, it.ev.seq)
	if err != nil {
		return poisonf(it.seq, "materialization of %s v%d is not backed by the journal: %v", it.artifact, it.version, err)
	}
	if want != *it.mat {
		return poisonf(it.seq, "materialize payload of %s v%d differs from what the journal implies (the claim.submitted at %d and claim.promoted at %d)",
			it.artifact, it.version, sub.seq, it.ev.seq)
	}
	return nil
}

// readEvents reads the journal events at the given (tenant, seq) pairs in
// one query.
func readEvents(ctx context.Context, q querier, tenants []pgtype.UUID, seqs []int64) (map[eventKey]*event, error) {
	out := map[eventKey]*event{}
	if len(tenants) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `
SELECT j.tenant_id, j.seq, j.event_type, j.recorded_at, j.prev_hash, j.hash, j.key_id, j.payload
FROM oml.journal j
JOIN unnest($1::uuid[], $2::bigint[]) AS w(t, s) ON j.tenant_id = w.t AND j.seq = w.s`, tenants, seqs)
	if err != nil {
		return nil, fmt.Errorf("read the submissions of the batch's materializations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		ev := &event{}
		var at time.Time
		if err := rows.Scan(&ev.tenant, &ev.seq, &ev.eventType, &at, &ev.prevHash, &ev.hash, &ev.keyID, &ev.payload); err != nil {
			return nil, fmt.Errorf("read the submissions of the batch's materializations: %w", err)
		}
		ev.recordedAt = at.UTC()
		out[eventKey{ev.tenant, ev.seq}] = ev
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the submissions of the batch's materializations: %w", err)
	}
	return out, nil
}

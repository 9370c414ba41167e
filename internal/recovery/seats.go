package recovery

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/journal"
)

// Seat placement: which outbox seq each restored outbox row gets.
//
// Most rows have a seq the lake records (classifyOutbox). An applied row
// whose seq the lake no longer shows — a silver change a later change of
// the same claim overwrote, a re-derived gold row, a workarea's change —
// must be reseated at a free seq between its tenant's neighbouring rows
// (so the tenant's rows keep their order and the row stays applied). Its
// real seq was in that gap; but the gap is shared with the other tenants
// whose tails were lost with it, and a seat one tenant takes greedily may
// be the only one left in another tenant's narrower gap. So every seat of
// a round is chosen at once (assignSeats): by earliest deadline first,
// which finds a placement whenever one exists (the real seqs are one), and
// each tenant's restore transaction then takes the seats chosen for it.

// seat is one outbox row that needs a seq in (lo, hi).
type seat struct {
	tenant uuid.UUID
	row    int   // index in the tenant's fold-ordered outbox rows
	lo, hi int64 // exclusive bounds: the neighbouring rows' seqs
	what   journal.OutboxRow
}

// classifyOutbox gives each outbox row the restored events imply (fold
// order) the seq the lake records (> 0), 0 for a row the lake had not
// applied yet, after the last restored bronze row (it draws a new seq
// above every txn version), or -1 for a row to be seated by seatsOf.
func classifyOutbox(rows []journal.OutboxRow, bronzeSeq map[int64]int64,
	silver map[journal.ClaimRef]silverRow, gold map[goldRef]int64, areas map[string]int64) (seqs []int64, pending int, err error) {
	seqs = make([]int64, len(rows))
	lastBronze := -1
	for i, o := range rows {
		switch o.Target {
		case journal.TargetBronzeEvents:
			seqs[i] = bronzeSeq[o.JournalSeq]
			lastBronze = i
		case journal.TargetSilverClaims:
			ref := journal.ClaimRef{ArtifactID: *o.ArtifactID, Version: *o.Version}
			if s, ok := silver[ref]; ok && s.journalSeq == o.JournalSeq {
				seqs[i] = s.outboxSeq
			} else {
				seqs[i] = -1 // decided below
			}
		case journal.TargetGoldLineage:
			// The lake holds the change with its outbox seq, or (a row
			// re-derived after prune) without one: decided below.
			if s := gold[goldRef{o.JournalSeq, *o.ArtifactID, *o.Version}]; s > 0 {
				seqs[i] = s
			} else {
				seqs[i] = -1
			}
		case journal.TargetGoldWorkareas:
			// The workarea's row says how far its changes are counted,
			// not at which seqs: decided below.
			seqs[i] = -1
		default:
			return nil, 0, fmt.Errorf("the fold implies a %s row, which restore-tail cannot place", o.Target)
		}
	}
	for i, o := range rows {
		if seqs[i] != -1 || i <= lastBronze {
			continue
		}
		if !appliedInLake(o, silver, gold, areas) {
			seqs[i] = 0
			pending++
		}
	}
	return seqs, pending, nil
}

// appliedInLake: the lake already holds the change the row carries.
func appliedInLake(o journal.OutboxRow, silver map[journal.ClaimRef]silverRow, gold map[goldRef]int64, areas map[string]int64) bool {
	switch o.Target {
	case journal.TargetGoldLineage:
		_, ok := gold[goldRef{o.JournalSeq, *o.ArtifactID, *o.Version}]
		return ok
	case journal.TargetGoldWorkareas:
		last, ok := areas[areaOf(o)]
		return ok && last >= o.JournalSeq
	default:
		s, ok := silver[journal.ClaimRef{ArtifactID: *o.ArtifactID, Version: *o.Version}]
		return ok && (o.Op == journal.OpMaterialize || s.journalSeq >= o.JournalSeq)
	}
}

// seatsOf lists the rows classifyOutbox left at -1, each with the gap
// between the nearest rows before and after it that have a seq (maxTxn+1
// when none follows): never above its real seq, so it stays applied.
func seatsOf(tenant uuid.UUID, rows []journal.OutboxRow, seqs []int64, maxTxn int64) []seat {
	var out []seat
	for i, s := range seqs {
		if s != -1 {
			continue
		}
		st := seat{tenant: tenant, row: i, hi: maxTxn + 1, what: rows[i]}
		for j := i - 1; j >= 0; j-- {
			if seqs[j] > 0 {
				st.lo = seqs[j]
				break
			}
		}
		for j := i + 1; j < len(seqs); j++ {
			if seqs[j] > 0 {
				st.hi = seqs[j]
				break
			}
		}
		out = append(out, st)
	}
	return out
}

// assignSeats chooses a seq for every seat, none of them taken (an outbox
// row's seq, or one the lake records: known) or chosen twice. Earliest
// deadline first: seats by their upper bound, each given the smallest
// free seq above its lower bound. Seats of one tenant's gap share both
// bounds and keep their fold order, so their seqs rise with it.
func assignSeats(seats []seat, taken func(int64) bool) (map[uuid.UUID]map[int]int64, error) {
	order := append([]seat(nil), seats...)
	sort.SliceStable(order, func(a, b int) bool {
		if order[a].hi != order[b].hi {
			return order[a].hi < order[b].hi
		}
		return order[a].lo < order[b].lo
	})
	chosen := map[int64]bool{}
	out := map[uuid.UUID]map[int]int64{}
	for _, st := range order {
		free := int64(0)
		for s := st.lo + 1; s < st.hi; s++ {
			if !chosen[s] && !taken(s) {
				free = s
				break
			}
		}
		if free == 0 {
			return nil, &noSeatError{seat: st}
		}
		chosen[free] = true
		if out[st.tenant] == nil {
			out[st.tenant] = map[int]int64{}
		}
		out[st.tenant][st.row] = free
	}
	return out, nil
}

// noSeatError: a gap holds fewer free seqs than rows to seat in it — the
// outbox does not hold the history the lake records.
type noSeatError struct{ seat seat }

func (e *noSeatError) Error() string {
	return fmt.Sprintf("tenant %s: no free outbox seq between %d and %d for the %s %s row of journal seq %d: accept the fork instead (oml chain accept-fork)",
		e.seat.tenant, e.seat.lo, e.seat.hi, e.seat.what.Target, e.seat.what.Op, e.seat.what.JournalSeq)
}

// takenSeqs reads the outbox seqs in (lo, hi): with known, the seqs no
// seat may take.
func takenSeqs(ctx context.Context, q Querier, seats []seat, known map[int64]bool) (func(int64) bool, error) {
	if len(seats) == 0 {
		return func(int64) bool { return true }, nil
	}
	lo, hi := seats[0].lo, seats[0].hi
	for _, s := range seats[1:] {
		lo, hi = min(lo, s.lo), max(hi, s.hi)
	}
	rows, err := q.Query(ctx, `SELECT seq FROM oml.outbox WHERE seq > $1 AND seq < $2`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("look for free outbox seqs: %w", err)
	}
	used, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("look for free outbox seqs: %w", err)
	}
	inOutbox := make(map[int64]bool, len(used))
	for _, u := range used {
		inOutbox[u] = true
	}
	return func(s int64) bool { return inOutbox[s] || known[s] }, nil
}

// seatRound folds each restorable tail of a round (read only), places
// its outbox rows, and chooses the seats of all of them together.
func seatRound(ctx context.Context, pool *pgxpool.Pool, round []*TenantResult, known map[int64]bool, maxTxn int64) error {
	var seats []seat
	for _, r := range round {
		if r.Status != StatusRestorable {
			continue
		}
		plan, err := foldTail(ctx, pool, r)
		if err != nil {
			return err
		}
		p := r.plan
		p.outbox = plan.Outbox
		if p.seqs, p.pending, err = classifyOutbox(p.outbox, p.outboxOf, p.silver, p.gold, p.areas); err != nil {
			return fmt.Errorf("tenant %s: %w", r.Tenant, err)
		}
		seats = append(seats, seatsOf(r.Tenant, p.outbox, p.seqs, maxTxn)...)
	}
	taken, err := takenSeqs(ctx, pool, seats, known)
	if err != nil {
		return err
	}
	chosen, err := assignSeats(seats, taken)
	if err != nil {
		return err
	}
	for _, r := range round {
		if r.Status != StatusRestorable {
			continue
		}
		p := r.plan
		p.reseated = nil
		for i := range p.seqs {
			if s, ok := chosen[r.Tenant][i]; ok {
				p.seqs[i] = s
				p.reseated = append(p.reseated, s)
			}
		}
	}
	return nil
}

// seatsStillFree: no outbox row took a chosen seat since seatRound read
// the outbox (the promoted database's sequence may lie below the lake's).
func seatsStillFree(ctx context.Context, q Querier, tenant uuid.UUID, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE seq = ANY($1)`, seqs).Scan(&n); err != nil {
		return fmt.Errorf("tenant %s: check the chosen outbox seqs: %w", tenant, err)
	}
	if n > 0 {
		return fmt.Errorf("tenant %s: %d outbox seqs chosen for the restore were taken while it was planned: run oml chain restore-tail again", tenant, n)
	}
	return nil
}

// batchQuerier is a pool or a transaction: foldTail loads the fold state
// in one batch.
type batchQuerier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// foldTail folds the tail's verified events onto the tenant's fold state,
// by the journal's own fold: the plan of rows they imply.
func foldTail(ctx context.Context, q batchQuerier, r *TenantResult) (*journal.Plan, error) {
	p := r.plan
	evs := make([]journal.Event, len(p.events))
	keyIDs := make([]string, len(p.events))
	applied := make([]journal.Applied, len(p.events))
	for i, e := range p.events {
		var err error
		evs[i] = journal.Event{Type: journal.Type(e.EventType), Payload: e.Payload}
		if evs[i], err = evs[i].Prepared(); err != nil {
			return nil, err
		}
		keyIDs[i] = e.KeyID
		applied[i] = journal.Applied{Seq: uint64(e.Seq), RecordedAt: e.RecordedAt}
		copy(applied[i].Hash[:], e.Hash)
	}
	st := journal.NewState(r.Tenant)
	needs := journal.NeedsOf(keyIDs[0], evs)
	for _, k := range keyIDs[1:] {
		if !slices.Contains(needs.KeyIDs, k) {
			needs.KeyIDs = append(needs.KeyIDs, k)
		}
	}
	var b pgx.Batch
	journal.QueueLoad(&b, st, needs)
	if err := q.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("restore tenant %s: load the fold state: %w", r.Tenant, err)
	}
	plan, err := journal.Restore(st, keyIDs, applied, evs)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: the restored events do not fold: %w", r.Tenant, err)
	}
	return plan, nil
}

// sameOutboxRow: two folds imply the same row.
func sameOutboxRow(a, b journal.OutboxRow) bool {
	return a.TenantID == b.TenantID && a.JournalSeq == b.JournalSeq && a.Target == b.Target && a.Op == b.Op &&
		ptrEqual(a.ArtifactID, b.ArtifactID) && ptrEqual(a.Version, b.Version) && bytes.Equal(a.Payload, b.Payload)
}

func ptrEqual[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

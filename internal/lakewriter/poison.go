package lakewriter

import (
	"context"
	"errors"
	"fmt"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// ErrNoSigner means a poison row is past its budget but the writer has no
// signing key to journal materialize.skipped with.
var ErrNoSigner = errors.New("no signing key to journal materialize.skipped")

// handlePoison counts one failed attempt for each poison row (persisted in
// oml.outbox_attempts, so restarts do not reset the budget) and dead-letters
// the rows whose budget is spent: one PostgreSQL transaction appends
// materialize.skipped to the row's tenant chain and copies the row into
// oml.dead_letter (the fold does both). It returns the dead-lettered seqs;
// when some poison rows are still inside their budget it returns
// errPoisonRetry after dead-lettering the others, so the batch is retried.
func (d *Drainer) handlePoison(ctx context.Context, poison []*item) ([]int64, error) {
	d.deadMu.Lock()
	defer d.deadMu.Unlock()
	seen := map[int64]bool{}
	var spent []*item
	var attempts = map[int64]int{}
	unique := 0
	for _, it := range poison {
		if seen[it.seq] {
			continue
		}
		seen[it.seq] = true
		unique++
		n, err := outbox.CountAttempt(ctx, d.db, it.seq, it.poison.Error())
		if err != nil {
			return nil, err
		}
		d.opts.Metrics.retry("poison")
		attempts[it.seq] = n
		if n >= d.opts.PoisonBudget {
			spent = append(spent, it)
		} else {
			d.log.Warn("outbox row failed; will retry", "outbox_seq", it.seq, "table", it.table.String(),
				"attempt", n, "budget", d.opts.PoisonBudget, "error", it.poison.Error())
		}
	}
	if len(spent) > 0 {
		if err := d.crash(MidDeadLetter, spent[0].table); err != nil {
			return nil, err
		}
	}
	var dead []int64
	for _, it := range spent {
		if d.opts.Signer == nil {
			return dead, fmt.Errorf("%w: outbox row %d spent its retry budget (%s) and must be dead-lettered; pass --signing-key or set OML_SIGNING_KEY_FILE",
				ErrNoSigner, it.seq, it.poison.Error())
		}
		ev, err := journal.New(journal.MaterializeSkipped{
			OutboxSeq: it.seq, JournalSeq: it.journalSeq, Target: it.target, Op: it.op,
			ArtifactID: it.artifact, Version: int(it.version), Attempts: attempts[it.seq],
			Error: it.poison.Error(), By: tables.AppID + "@" + d.opts.Holder,
		})
		if err != nil {
			return dead, fmt.Errorf("dead-letter outbox row %d: %w", it.seq, err)
		}
		// A row of a tenant that does not exist has no chain to record its
		// skip: the provider chain records it (the fold allows exactly that).
		on := it.table.Tenant
		if it.ghost {
			on = journal.ProviderTenant
		}
		if _, err := chain.Append(ctx, d.db, d.currentSigner(), on, ev); err != nil {
			if errors.Is(err, journal.ErrRejected) && d.isDeadLettered(ctx, it.seq) {
				// Another writer dead-lettered it first.
				dead = append(dead, it.seq)
				continue
			}
			return dead, fmt.Errorf("dead-letter outbox row %d: %w", it.seq, err)
		}
		d.log.Error("outbox row dead-lettered after its retry budget; repair the cause and run oml deadletter reenqueue",
			"outbox_seq", it.seq, "table", it.table.String(), "chain", on.String(), "attempts", attempts[it.seq], "error", it.poison.Error())
		d.opts.Metrics.deadLettered()
		dead = append(dead, it.seq)
	}
	if len(dead) < unique {
		return dead, errPoisonRetry
	}
	return dead, nil
}

func (d *Drainer) isDeadLettered(ctx context.Context, seq int64) bool {
	ok, _ := outbox.IsDeadLettered(ctx, d.db, seq)
	return ok
}

package chainverify

import (
	"context"
	"fmt"
	"iter"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Chain streams one tenant's stored events after seq after, in seq order,
// in tx's snapshot, a page at a time (for exports: the caller never holds
// a chain in memory). The yielded Event is reused between iterations.
func Chain(ctx context.Context, tx pgx.Tx, tenant uuid.UUID, after int64) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		ev := &Event{}
		never := func(uuid.UUID) bool { return false }
		for {
			n, stop, err := journalPageRead(ctx, tx, tenant, after, defaultJournalPage, ev, yield, never)
			if err != nil {
				yield(nil, fmt.Errorf("read the journal of tenant %s: %w", tenant, err))
				return
			}
			if stop || n < defaultJournalPage {
				return
			}
			after = ev.Seq
		}
	}
}

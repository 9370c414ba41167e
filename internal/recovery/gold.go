package recovery

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// goldRef is one gold.lineage row's identity: one change (journal seq) to
// one claim.
type goldRef struct {
	journalSeq int64
	artifact   string
	version    int
}

// goldIndex reads the (journal seq, artifact, version) → outbox seq of
// tenant's gold.lineage rows with journal seq ≥ from (the restored tail's
// rows the lake applied; 0 for a row re-derived after prune, which has no
// outbox seq). Restore-tail puts the tail's gold.lineage outbox rows back
// at the seqs the lake applied them at, as it does for bronze and silver.
func goldIndex(ctx context.Context, lake store.Store, tenant uuid.UUID, from int64) (map[goldRef]int64, error) {
	out := map[goldRef]int64{}
	cols := tables.LineageColumns(tables.LineageJournalSeq, tables.LineageArtifactID, tables.LineageVersion, tables.LineageOutboxSeq)
	err := scanTable(ctx, lake, tables.TableKey{Tenant: tenant, Kind: tables.Gold}, cols.Columns(), func(r pq.Row) {
		if g := cols.Decode(r); g.JournalSeq >= from {
			out[goldRef{g.JournalSeq, g.ArtifactID, int(g.Version)}] = g.OutboxSeq
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// areaIndex reads, per workarea, the last journal seq tenant's
// gold.workareas row counts (last_journal_seq). A workarea's changes reach
// its row in journal order under the table's txn fence, so a restored
// tail's gold.workareas row is applied when its change is at or below it.
func areaIndex(ctx context.Context, lake store.Store, tenant uuid.UUID) (map[string]int64, error) {
	out := map[string]int64{}
	cols := tables.WorkareaColumns(tables.WorkareaID, tables.WorkareaLastJournalSeq)
	err := scanTable(ctx, lake, tables.TableKey{Tenant: tenant, Kind: tables.Workareas}, cols.Columns(), func(r pq.Row) {
		g := cols.Decode(r)
		out[g.WorkareaID] = max(out[g.WorkareaID], g.LastJournalSeq)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// areaOf is the workarea a gold.workareas outbox row changes.
func areaOf(o journal.OutboxRow) string {
	var p journal.LineagePayload
	_ = json.Unmarshal(o.Payload, &p)
	return p.WorkareaID
}

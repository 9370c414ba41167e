package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// loadTable loads one of a tenant's tables; nil when it does not exist.
func loadTable(ctx context.Context, lake store.Store, key tables.TableKey) (*delta.Snapshot, store.Store, error) {
	st, err := key.Store(lake)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key.Path(), err)
	}
	snap, err := delta.Load(ctx, st)
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the Delta log of %s: %w", key.Path(), err)
	}
	return snap, st, nil
}

// scanTable calls each with the cols of every live row of one of a
// tenant's tables; a table that does not exist has no rows.
func scanTable(ctx context.Context, lake store.Store, key tables.TableKey, cols []string, each func(pq.Row)) error {
	snap, st, err := loadTable(ctx, lake, key)
	if err != nil || snap == nil {
		return err
	}
	err = snap.Scan(ctx, st, delta.ScanOptions{Columns: cols}, func(_ *delta.Add, rows []pq.Row) error {
		for _, r := range rows {
			each(r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", key.Path(), err)
	}
	return nil
}

// txnVersions caches the lake writer's txn version of every table of the
// tenants asked about.
type txnVersions struct {
	lake store.Store
	seen map[uuid.UUID]bool
	max  int64
}

// maxOver returns the highest txn version of any table of the tenants
// (and of every tenant asked about before).
func (tv *txnVersions) maxOver(ctx context.Context, tenants ...uuid.UUID) (int64, error) {
	for _, t := range tenants {
		if tv.seen[t] {
			continue
		}
		for _, k := range tables.Kinds {
			snap, _, err := loadTable(ctx, tv.lake, tables.TableKey{Tenant: t, Kind: k})
			if err != nil {
				return 0, err
			}
			if snap == nil {
				continue
			}
			if v, ok := snap.TxnVersion(tables.AppID); ok && v > tv.max {
				tv.max = v
			}
		}
		tv.seen[t] = true
	}
	return tv.max, nil
}

// silverRow is what silver.claims says of a claim's last change.
type silverRow struct {
	journalSeq, outboxSeq int64
}

// silverIndex reads the (artifact, version) → last change of tenant's
// silver.claims table (four small columns).
func silverIndex(ctx context.Context, lake store.Store, tenant uuid.UUID) (map[journal.ClaimRef]silverRow, error) {
	out := map[journal.ClaimRef]silverRow{}
	cols := tables.SilverColumns(tables.SilverArtifactID, tables.SilverVersion, tables.SilverJournalSeq, tables.SilverOutboxSeq)
	err := scanTable(ctx, lake, tables.TableKey{Tenant: tenant, Kind: tables.Silver}, cols.Columns(), func(r pq.Row) {
		c := cols.Decode(r)
		ref := journal.ClaimRef{ArtifactID: c.ArtifactID, Version: int(c.Version)}
		if old, ok := out[ref]; !ok || c.JournalSeq > old.journalSeq {
			out[ref] = silverRow{journalSeq: c.JournalSeq, outboxSeq: c.OutboxSeq}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

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
	key := tables.TableKey{Tenant: tenant, Kind: tables.Silver}
	snap, st, err := loadTable(ctx, lake, key)
	if err != nil || snap == nil {
		return out, err
	}
	err = snap.Scan(ctx, st, delta.ScanOptions{Columns: []string{"artifact_id", "version", "journal_seq", "outbox_seq"}},
		func(_ *delta.Add, rows []pq.Row) error {
			for _, r := range rows {
				a, _ := r[0].(string)
				v, _ := r[1].(int32)
				j, _ := r[2].(int64)
				o, _ := r[3].(int64)
				ref := journal.ClaimRef{ArtifactID: a, Version: int(v)}
				if old, ok := out[ref]; !ok || j > old.journalSeq {
					out[ref] = silverRow{journalSeq: j, outboxSeq: o}
				}
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key.Path(), err)
	}
	return out, nil
}

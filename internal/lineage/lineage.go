package lineage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// AsOf chooses the table version to read: the current one (zero), a Delta
// version, or the latest version committed at or before a time.
type AsOf struct {
	Version *int64
	Time    *time.Time
}

// Query is one artifact's history in one tenant's gold.lineage.
type Query struct {
	Tenant     uuid.UUID
	ArtifactID string
	Version    int32 // 0: every version
	AsOf       AsOf
}

// Result is what Read found in one tenant's table.
type Result struct {
	Tenant uuid.UUID
	Table  string // the table's path under the lake root
	// Exists: the tenant has a gold.lineage table (else nothing else is set).
	Exists bool
	// DeltaVersion is the table version read; TxnVersion its lake-writer
	// txn version (the outbox seq every row through which it holds), -1
	// when it has none.
	DeltaVersion int64
	TxnVersion   int64
	Changes      []tables.GoldLineageRow // in journal order (seq, then version)
}

// ErrBeforeHistory wraps a time-travel point the table's log no longer (or
// never) held: a version that does not exist, a time before the first
// commit.
var ErrBeforeHistory = errors.New("no such table version")

// Read reads q's artifact's changes from the tenant's gold.lineage.
func Read(ctx context.Context, lake store.Store, q Query) (Result, error) {
	key := tables.TableKey{Tenant: q.Tenant, Kind: tables.Gold}
	res := Result{Tenant: q.Tenant, Table: key.Path(), DeltaVersion: -1, TxnVersion: -1}
	st, err := key.Store(lake)
	if err != nil {
		return res, err
	}
	var opts []delta.LoadOptions
	switch {
	case q.AsOf.Version != nil:
		opts = append(opts, delta.LoadOptions{Version: q.AsOf.Version})
	case q.AsOf.Time != nil:
		v, err := delta.VersionAsOf(ctx, st, *q.AsOf.Time)
		if errors.Is(err, delta.ErrTableNotFound) {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("%w: %v", ErrBeforeHistory, err)
		}
		opts = append(opts, delta.LoadOptions{Version: &v})
	}
	snap, err := delta.Load(ctx, st, opts...)
	if errors.Is(err, delta.ErrTableNotFound) {
		return res, nil
	}
	if errors.Is(err, delta.ErrVersionNotFound) {
		return res, fmt.Errorf("%w: table %s: %v", ErrBeforeHistory, key, err)
	}
	if err != nil {
		return res, fmt.Errorf("read %s: %w", key, err)
	}
	res.Exists, res.DeltaVersion = true, snap.Version()
	if v, ok := snap.TxnVersion(tables.AppID); ok {
		res.TxnVersion = v
	}
	err = snap.Scan(ctx, st, delta.ScanOptions{}, func(_ *delta.Add, rows []pq.Row) error {
		for _, r := range rows {
			g := tables.DecodeLineage(r)
			if g.ArtifactID != q.ArtifactID || (q.Version != 0 && g.Version != q.Version) {
				continue
			}
			g.RecordedAt = g.RecordedAt.UTC()
			res.Changes = append(res.Changes, g)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("read %s: %w", key, err)
	}
	sort.Slice(res.Changes, func(i, j int) bool {
		a, b := res.Changes[i], res.Changes[j]
		if a.JournalSeq != b.JournalSeq {
			return a.JournalSeq < b.JournalSeq
		}
		return a.Version < b.Version
	})
	return res, nil
}

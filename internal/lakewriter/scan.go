package lakewriter

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// The start-up scan: every tenant table's log is read once, several tables
// at a time, and what recovery needs of it is kept — the txn version, the
// record of the commit that set it, and bronze's newest event for the
// fork check — so the fork check, the recovery of the newest batch, the
// continuity check and the catch-up all share one read per table. Before
// this, each of them opened every table again (the registry keeps at most
// --max-open-tables writers, so with many tenants every pass re-read the
// logs, one table after another): a start with nothing to do took 58–69 s
// at 2,000 tenants.

// scanned is what the start-up scan kept of one table that exists.
type scanned struct {
	txn    int64 // the lake writer's txn version (0: none)
	hasTxn bool
	// rec is the record of the commit that set txn, when the snapshot
	// read that commit (nil: the txn came from a checkpoint; read the log).
	rec *foundRecord
	// head is bronze's newest event (bronze tables, when the fork check
	// runs); headErr a failure to read it, reported like bronze.ReadHead's.
	head    bronze.Head
	headOK  bool
	headErr error
}

// tableScan is the result of one start-up scan. Tables that do not exist
// are absent; tables held for a fault of their own are absent too (the
// scan holds them).
type tableScan struct {
	tables map[tables.TableKey]*scanned
	absent map[tables.TableKey]bool // read: there is no such table
}

// get returns what the scan kept of key (nil when the table does not
// exist or is held).
func (s *tableScan) get(key tables.TableKey) *scanned {
	if s == nil {
		return nil
	}
	return s.tables[key]
}

// parallel is how many tables are opened or committed at once: --parallel,
// else what suits the store (store.Concurrency: a few on a local disk,
// many on S3).
func (d *Drainer) parallel() int {
	if d.opts.Parallel > 0 {
		return d.opts.Parallel
	}
	return store.Concurrency(d.opts.Lake)
}

// scanOptions say what scanTables keeps beyond the txn versions.
type scanOptions struct {
	// BronzeHeads also reads bronze's newest event of each tenant, for
	// the fork check.
	BronzeHeads bool
}

// scanTables opens every table of tenants that is not held, parallel()
// at a time, through the registry (so the writers of the first
// --max-open-tables tables stay open for the first batches).
func (d *Drainer) scanTables(ctx context.Context, tenants []uuid.UUID, opts scanOptions) (*tableScan, error) {
	out := &tableScan{tables: map[tables.TableKey]*scanned{}, absent: map[tables.TableKey]bool{}}
	empty, err := d.emptyTenants(ctx, tenants)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.parallel())
	for _, t := range tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: t, Kind: k}
			if d.isHeldTable(key) {
				continue
			}
			if empty[t] {
				d.tables.markAbsent(key)
				mu.Lock() // the reads started for earlier tenants write here too
				out.absent[key] = true
				mu.Unlock()
				continue
			}
			g.Go(func() error {
				w, err := d.tables.writer(gctx, key, leaveMissing)
				if classify(err) == faultTable {
					d.holdTable(gctx, key, err)
					return nil
				}
				if err != nil {
					return err
				}
				if w == nil {
					d.tables.markAbsent(key) // its first batch creates it without reading again
					mu.Lock()
					out.absent[key] = true
					mu.Unlock()
					return nil
				}
				// No commit runs during the scan: the snapshot is stable.
				snap := w.Snapshot()
				s := &scanned{}
				s.txn, s.hasTxn = snap.TxnVersion(tables.AppID)
				if ci, ok := snap.TxnCommitInfo(tables.AppID); ok {
					rec, found := tables.ParseBatchBounds(ci)
					s.rec = &foundRecord{rec: rec, ok: found}
				} else if cp := snap.CheckpointVersion(); s.hasTxn && cp >= 0 {
					// The txn came from the checkpoint: the lake writer
					// checkpoints right after its own commit, so the
					// commit that set it is normally the checkpoint's
					// (one read, no listing); if not, CheckContinuity
					// reads the log.
					if e, err := delta.CommitEntry(gctx, w.Store(), cp); err == nil {
						for _, t := range e.Txns {
							if t.AppID == tables.AppID && t.Version == s.txn {
								rec, found := tables.ParseBatchBounds(e.CommitInfo)
								s.rec = &foundRecord{rec: rec, ok: found}
							}
						}
					}
				}
				if opts.BronzeHeads && k == tables.Bronze {
					s.head, s.headOK, s.headErr = bronze.HeadOf(gctx, snap, w.Store(), t)
				}
				mu.Lock()
				out.tables[key] = s
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// headReader serves the fork check's bronze heads from the scan, and reads
// the tables the scan did not see (a tenant only in oml.chain_heads, a
// held table) as the fork check would.
func (s *tableScan) headReader(lake store.Store) func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error) {
	return func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error) {
		if sc := s.get(bronze.Key(tenant)); sc != nil {
			return sc.head, sc.headOK, sc.headErr
		}
		if s != nil && s.absent[bronze.Key(tenant)] {
			return bronze.Head{}, false, nil
		}
		return bronze.ReadHead(ctx, lake, tenant)
	}
}

// emptyTenants returns the tenants under whose directory the lake holds
// nothing at all, so none of their tables exists, when the store can tell
// in one request a tenant (store.AnyUnder: S3's LIST of at most one key);
// on other stores, none. A fresh 10,000-tenant lake on S3 is read with
// 10,000 requests instead of 80,000. Tables are created only under the
// lake writer's lease, which this process holds while it scans; a table
// someone creates anyway after the check makes the first commit lose its
// put-if-absent race, as for any table the scan read absent.
func (d *Drainer) emptyTenants(ctx context.Context, tenants []uuid.UUID) (map[uuid.UUID]bool, error) {
	empty := map[uuid.UUID]bool{}
	var mu sync.Mutex
	probe := func(ctx context.Context, t uuid.UUID) (known bool, err error) {
		found, known, err := store.AnyUnder(ctx, d.opts.Lake, tables.TenantPrefix(t))
		if err != nil {
			return false, fmt.Errorf("list the lake under tenant %s: %w", t, err)
		}
		if known && !found {
			mu.Lock()
			empty[t] = true
			mu.Unlock()
		}
		return known, nil
	}
	if len(tenants) == 0 {
		return empty, nil
	}
	// The first answer says whether the store can tell at all.
	if known, err := probe(ctx, tenants[0]); err != nil || !known {
		return empty, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.parallel())
	for _, t := range tenants[1:] {
		g.Go(func() error {
			_, err := probe(gctx, t)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return empty, nil
}

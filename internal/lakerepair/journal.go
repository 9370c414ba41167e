package lakerepair

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// historyScan bounds how many of a table's newest commits are searched for
// repair commits not yet journalled.
const historyScan = 200

type commitRef struct {
	tenant     string // RepairedTable.TenantID: "" for the chain's own tables
	table      string
	version    int64
	planDigest string
}

// journalPending appends one lake.repaired per tenant in scope for every
// repair commit of its tables that no lake.repaired names yet (this run's,
// or an earlier run's that crashed before journalling).
func journalPending(ctx context.Context, opts Options, planDigest string) ([]Journalled, error) {
	names, err := tenantNames(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	lost, err := unjournalledLost(ctx, opts)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, 0, len(names))
	for id := range names {
		if opts.Tenant == nil || *opts.Tenant == id || (id == journal.ProviderTenant && len(lost) > 0) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	out := []Journalled{}
	for _, id := range ids {
		var tables []journal.RepairedTable
		if opts.Tenant == nil || *opts.Tenant == id {
			if tables, err = unjournalled(ctx, opts, id); err != nil {
				return out, err
			}
		}
		if id == journal.ProviderTenant {
			// Lost tenants' tables are journalled on the provider chain (lost.go).
			tables = append(tables, lost...)
		}
		if len(tables) == 0 {
			continue
		}
		p := journal.LakeRepaired{PlanDigest: planDigest, Tables: tables, Counts: map[string]int64{}, By: opts.By}
		same := true
		for _, t := range tables {
			same = same && t.PlanDigest == tables[0].PlanDigest
			for c, n := range t.Classes {
				p.Counts[c] += n
			}
		}
		if same {
			p.PlanDigest = tables[0].PlanDigest
		}
		ev, err := journal.New(p)
		if err != nil {
			return out, err
		}
		recs, err := chain.Append(ctx, opts.Pool, opts.Signer, id, ev)
		if err != nil {
			return out, fmt.Errorf("journal lake.repaired on the chain of tenant %s: %w (the repair itself is committed; re-run oml lake repair to journal it)", id, err)
		}
		out = append(out, Journalled{Tenant: id, Seq: int64(recs[0].Seq), Tables: len(tables)})
	}
	return out, nil
}

// unjournalled lists the repair commits of tenant's tables in scope that
// no lake.repaired on its chain names.
func unjournalled(ctx context.Context, opts Options, tenant uuid.UUID) ([]journal.RepairedTable, error) {
	var found []journal.RepairedTable
	for _, k := range tables.Kinds {
		key := tables.TableKey{Tenant: tenant, Kind: k}
		if !opts.inScope(key) {
			continue
		}
		ts, err := repairCommits(ctx, opts.Lake, key)
		if err != nil {
			return nil, err
		}
		found = append(found, ts...)
	}
	return notJournalled(ctx, opts, tenant, found)
}

// repairCommits lists the repair commits among the newest historyScan of
// key's table (none when the table does not exist).
func repairCommits(ctx context.Context, lake store.Store, key tables.TableKey) ([]journal.RepairedTable, error) {
	st, err := store.Sub(lake, key.Path())
	if err != nil {
		return nil, err
	}
	hist, err := delta.History(ctx, st, delta.HistoryOptions{Limit: historyScan})
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", key, err)
	}
	var found []journal.RepairedTable
	for _, h := range hist {
		if h.Operation != Operation {
			continue
		}
		r, ok := parseRepairRecord(h.CommitInfo)
		if !ok {
			continue
		}
		found = append(found, journal.RepairedTable{Table: string(key.Kind), Action: r.Action, DeltaVersion: h.Version,
			TxnVersion: r.TxnVersion, PlanDigest: r.PlanDigest, Classes: r.Classes, RowsRemoved: r.RowsRemoved,
			RowsAdded: r.RowsAdded, Archive: r.Archive})
	}
	return found, nil
}

// notJournalled keeps those of found that no lake.repaired on chain's
// chain names, in table order.
func notJournalled(ctx context.Context, opts Options, chain uuid.UUID, found []journal.RepairedTable) ([]journal.RepairedTable, error) {
	if len(found) == 0 {
		return nil, nil
	}
	done, err := journalledCommits(ctx, opts, chain)
	if err != nil {
		return nil, err
	}
	var out []journal.RepairedTable
	for _, t := range found {
		if !done[commitRef{t.TenantID, t.Table, t.DeltaVersion, t.PlanDigest}] {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TenantID != out[j].TenantID {
			return out[i].TenantID < out[j].TenantID
		}
		if out[i].Table != out[j].Table {
			return out[i].Table < out[j].Table
		}
		return out[i].DeltaVersion < out[j].DeltaVersion
	})
	return out, nil
}

// journalledCommits reads which repair commits tenant's lake.repaired
// events name.
func journalledCommits(ctx context.Context, opts Options, tenant uuid.UUID) (map[commitRef]bool, error) {
	rows, err := opts.Pool.Query(ctx, `SELECT payload FROM oml.journal WHERE tenant_id = $1 AND event_type = $2 ORDER BY seq`,
		tenant, string(journal.TypeLakeRepaired))
	if err != nil {
		return nil, fmt.Errorf("read the lake.repaired events of tenant %s: %w", tenant, err)
	}
	defer rows.Close()
	done := map[commitRef]bool{}
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return nil, err
		}
		p, err := journal.Decode(journal.TypeLakeRepaired, payload)
		if err != nil {
			return nil, fmt.Errorf("a lake.repaired event of tenant %s does not decode: %w; run oml chain verify", tenant, err)
		}
		for _, t := range p.(journal.LakeRepaired).Tables {
			done[commitRef{t.TenantID, t.Table, t.DeltaVersion, t.PlanDigest}] = true
		}
	}
	return done, rows.Err()
}

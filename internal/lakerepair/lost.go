package lakerepair

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
)

// Tables of a tenant of a lost timeline (issue 11).
//
// A failover to a standby that never saw `tenant create X` (or a
// point-in-time restore before it) leaves X's lake tables behind: the
// drain only ever creates tables for tenants the database knows (a row of
// an unknown tenant is refused by the row check), so a table under a
// tenant id that oml.tenants does not hold can only be from a history the
// database no longer has. Nothing else looks at them (the continuity
// check, reconcile and doctor go by the database's tenants), so they would
// stay for ever, with the lost timeline's ciphertext in silver.
//
// The repair finds them by listing the lake root (the only place they are
// named; a repair reads every table anyway), archives every row of every
// live file, and removes every file in one OML REPAIR commit (action
// remove; the txn version is kept). The table's log stays: history is
// evidence, and vacuum deletes the data files after the retention. A
// table with no live file is done.
//
// Journal: X has no chain in the database, and its creation was lost from
// the provider chain's tail; the provider chain is where tenants are
// created (and where a fork acceptance is journalled), so the removal is
// journalled there: one lake.repaired on the provider chain naming each
// removal commit with its tenant_id (journal.RepairedTable.TenantID).

// LostTenant is the class of a table whose tenant the database does not
// know.
const LostTenant Class = "lost-timeline-tenant"

// ActionRemove empties a lost tenant's table (archive first).
const ActionRemove = "remove"

// lostTables lists, by listing the lake root, every table under a tenant
// id the database does not know (with opts.Tenant, only that id's).
func lostTables(ctx context.Context, opts Options) ([]tables.TableKey, error) {
	names, err := tenantNames(ctx, opts.Pool)
	if err != nil {
		return nil, err
	}
	objs, err := opts.Lake.List(ctx, "", "")
	if err != nil {
		return nil, fmt.Errorf("list the lake root to find tables of tenants the database does not know: %w", err)
	}
	seen := map[tables.TableKey]bool{}
	var out []tables.TableKey
	for _, o := range objs {
		i := strings.Index(o.Key, "/_delta_log/")
		if i < 0 {
			continue
		}
		key, ok := parseTablePath(o.Key[:i])
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		if _, known := names[key.Tenant]; known || key.Tenant == journal.ProviderTenant {
			continue
		}
		if (opts.Tenant != nil && *opts.Tenant != key.Tenant) || (opts.Kind != "" && opts.Kind != key.Kind) {
			continue
		}
		out = append(out, key)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path() < out[j].Path() })
	return out, nil
}

// planLost adds a remove for every lost tenant's table that still has
// live files.
func planLost(ctx context.Context, opts Options, plan *Plan) error {
	if !opts.wants(LostTenant) {
		return nil
	}
	keys, err := lostTables(ctx, opts)
	if err != nil || len(keys) == 0 {
		return err
	}
	// While the provider chain's lost tail may still come back (the lake
	// only ahead, or a provider fork not accepted), so may the tenant:
	// restore-tail re-creates it from the provider's bronze and needs its
	// tables' bronze. Leave them until that is decided.
	wait := ""
	if plan.Continuity.State == lakewriter.ContinuityAhead {
		wait = "the lake is ahead of the database: oml chain restore-tail may bring the tenant back"
	} else {
		p := journal.ProviderTenant
		fc, err := chainverify.ForkCheck(ctx, opts.Pool, opts.Lake, &p)
		if err != nil {
			return fmt.Errorf("fork check of the provider chain before removing the tables of unknown tenants: %w", err)
		}
		if f, forked := fc.Forked(p); forked {
			wait = fmt.Sprintf("the provider chain lost its tail (%s at seq %d) and that is not accepted: oml chain restore-tail may bring the tenant back", f.Reason, f.Seq)
		}
	}
	for _, key := range keys {
		if wait != "" {
			plan.NotRepaired = append(plan.NotRepaired, Skipped{Tenant: key.Tenant, Table: string(key.Kind), Class: string(LostTenant), Count: 1,
				Reason:  fmt.Sprintf("tenant %s is not in the database; %s", key.Tenant, wait),
				Command: "oml chain restore-tail --tenant provider (tail only lost) or oml chain accept-fork --tenant provider --reason R (written over)"})
			continue
		}
		st, err := store.Sub(opts.Lake, key.Path())
		if err != nil {
			return err
		}
		snap, err := delta.Load(ctx, st)
		if err != nil {
			return fmt.Errorf("read %s (a table of tenant %s, whom the database does not know): %w", key, key.Tenant, err)
		}
		if snap.NumFiles() == 0 {
			continue
		}
		tp := TablePlan{Tenant: key.Tenant, Table: string(key.Kind), Path: key.Path(), key: key, Action: ActionRemove,
			Classes: map[string]int64{string(LostTenant): 1}, ReadVersion: snap.Version(), TxnVersion: -1, RestoreVersion: -1}
		if v, ok := snap.TxnVersion(tables.AppID); ok {
			tp.TxnVersion = v
		}
		tp.TargetTxnVersion = tp.TxnVersion
		tp.removes = snap.Files()
		sort.Slice(tp.removes, func(i, j int) bool { return tp.removes[i].Path < tp.removes[j].Path })
		tp.RemoveFiles = len(tp.removes)
		tp.Detail = fmt.Sprintf("tenant %s is in no chain of this database (created only in a lost timeline): archive every row, remove every file (%d); the log stays as evidence, vacuum deletes the files after the retention; journalled on the provider chain",
			key.Tenant, tp.RemoveFiles)
		plan.Tables = append(plan.Tables, tp)
	}
	return nil
}

// applyRemove archives every row of tp's table and removes every file.
func applyRemove(ctx context.Context, opts Options, planDigest string, tp *TablePlan) (TableResult, error) {
	res := TableResult{Path: tp.Path, Action: tp.Action, TxnVersion: tp.TargetTxnVersion}
	st, w, err := openPlanned(ctx, opts, tp)
	if err != nil {
		return res, err
	}
	if tp.erase, err = newEraser(tp.key, w.Snapshot()); err != nil {
		return res, err
	}
	arch, err := writeArchive(ctx, opts.Lake, st, w.Snapshot(), planDigest, tp, func(pq.Row) bool { return true }, nil)
	if err != nil {
		return res, err
	}
	res.RowsArchived, res.Archive = arch.Rows, arch.Manifest
	if err := opts.crash(AfterArchive, tp.Path); err != nil {
		return res, err
	}
	c := delta.Commit{
		Operation:           Operation,
		OperationParameters: map[string]any{"action": tp.Action, "classes": classList(tp.Classes), "planDigest": planDigest},
		OperationMetrics:    map[string]any{"numRemovedFiles": len(tp.removes), "numAddedFiles": 0, "numRemovedRows": arch.Rows},
		Extra: map[string]any{"omlRepair": repairRecord{PlanDigest: planDigest, Action: tp.Action, Classes: tp.Classes,
			ReadVersion: tp.ReadVersion, RestoreVersion: -1, TxnVersion: max(tp.TargetTxnVersion, 0), RowsRemoved: arch.Rows, Archive: arch.Manifest}},
	}
	v, err := commitRemoving(ctx, w, tp, c)
	if err != nil {
		return res, err
	}
	res.DeltaVersion = v
	return res, nil
}

// unjournalledLost lists the repair commits of lost tenants' tables that
// no lake.repaired on the provider chain names (journalled there, each
// with its tenant_id).
func unjournalledLost(ctx context.Context, opts Options) ([]journal.RepairedTable, error) {
	if !opts.wants(LostTenant) {
		return nil, nil
	}
	keys, err := lostTables(ctx, opts)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	var found []journal.RepairedTable
	for _, key := range keys {
		ts, err := repairCommits(ctx, opts.Lake, key)
		if err != nil {
			return nil, err
		}
		for i := range ts {
			ts[i].TenantID = key.Tenant.String()
		}
		found = append(found, ts...)
	}
	return notJournalled(ctx, opts, journal.ProviderTenant, found)
}

package lakewriter

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
)

// checkForks compares every tenant's journal with its newest witnessed
// head (chainverify.ForkCheck) and holds the tenants whose chain lost its
// tail or forked: their rows are not materialized, so the lake never builds
// on a chain that is not the one that was witnessed. Other tenants go on.
//
// scan, when given, serves the bronze heads read at start (scan.go); nil
// reads them now.
func (d *Drainer) checkForks(ctx context.Context, scan *tableScan) error {
	// The check reads the witnesses and replaces the holds: the
	// publication in flight, which writes both, ends first (none starts
	// meanwhile: only a batch's end starts one).
	d.waitWitness(ctx)
	if d.opts.NoForkCheck {
		d.noForkCheck()
		return nil
	}
	var read chainverify.HeadReader
	if scan != nil {
		read = scan.headReader(d.opts.Lake)
	}
	res, err := chainverify.ForkCheckCaching(ctx, d.db, d.opts.Lake, nil, read, &d.providerTrust)
	if err != nil {
		return fmt.Errorf("fork check against the witnessed heads: %w", err)
	}
	if scan != nil {
		// At start, before anything is written under this lease: what the
		// writer remembered of an earlier lease may be behind the lake.
		d.bronzeSeen.reset(res.Bronze)
		d.lastFullForkRead = time.Now()
	} else {
		d.bronzeSeen.seen(res.Bronze)
	}
	d.setHolds(res, nil)
	return nil
}

// noForkCheck is a fork check with Options.NoForkCheck: no tenant is held.
func (d *Drainer) noForkCheck() {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	d.lastForkCheck = time.Now()
	d.held = nil
}

// setHolds makes the tenants res found forked the held ones, and those
// in keep (held by publications since res was read) too, and returns the
// tenants it released: held before, and neither found nor kept now.
func (d *Drainer) setHolds(res *chainverify.ForkCheckResult, keep map[uuid.UUID]chainverify.Finding) []uuid.UUID {
	for _, e := range res.Untrusted {
		d.log.Warn("ignoring a witnessed head whose signature does not verify (tampered witness store?)", "error", e)
	}
	for _, e := range res.BronzeProblems {
		d.log.Warn("could not read a bronze table's newest event; comparing that tenant with its witness only", "error", e)
	}
	held := map[uuid.UUID]chainverify.Finding{}
	for _, f := range res.Findings {
		held[f.Tenant] = f
	}
	for t, f := range keep {
		if _, ok := held[t]; !ok {
			held[t] = f
		}
	}
	d.heldMu.Lock()
	var released []uuid.UUID
	for t, f := range held {
		if _, was := d.held[t]; !was {
			d.log.Error("refusing to materialize a tenant whose chain disagrees with its witnessed head; other tenants continue",
				"tenant", t.String(), "reason", string(f.Reason), "seq", f.Seq, "detail", f.Detail, "evidence", f.Evidence)
		}
	}
	for t := range d.held {
		if _, still := held[t]; !still {
			released = append(released, t)
			d.log.Info("tenant's chain agrees with its witnessed head again; catching its tables up", "tenant", t.String())
		}
	}
	d.held = held
	d.lastForkCheck = time.Now()
	d.heldMu.Unlock()
	d.stateChanged() // a batch read ahead was read under the old holds (prefetch.go)
	return released
}

// Refused returns the tenants currently held for a forked chain.
func (d *Drainer) Refused() []chainverify.Finding {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	out := make([]chainverify.Finding, 0, len(d.held))
	for _, f := range d.held {
		out = append(out, f)
	}
	return out
}

func (d *Drainer) dropHeld(items []*item) ([]*item, int) {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	if len(d.held) == 0 && len(d.heldTables) == 0 {
		return items, 0
	}
	kept := items[:0]
	n := 0
	var dropped []tables.TableKey
	defer func() { d.forgetComplete(dropped...) }() // complete.go
	for _, it := range items {
		_, tenantHeld := d.held[it.table.Tenant]
		_, tableHeld := d.heldTables[it.table]
		if tenantHeld || tableHeld {
			n++
			dropped = append(dropped, it.table)
			continue
		}
		kept = append(kept, it)
	}
	return kept, n
}

// catchUpRange is a table's catch-up: its rows in (from, to].
type catchUpRange struct {
	key      tables.TableKey
	from, to int64
}

// catchUp brings every table of a tenant that is not held up to the
// frontier, when rows were skipped while the tenant was held: the tables
// behind the frontier are probed in a few round trips (one indexed probe
// each, outbox.TablesHaveRows), and a table that missed rows gets one scoped pass
// over (its txn version, frontier] of its own rows, committed with
// omlBatch.catchUp. Afterwards every table again holds all its rows up to
// the frontier. scan, when given, holds the txn versions read at start.
func (d *Drainer) catchUp(ctx context.Context, tenants []uuid.UUID, scan *tableScan) error {
	f := d.frontier.Load()
	// A table with nothing in it is rebuilt through its prune mark, even
	// past the frontier: the lake may resume below the mark (the newest
	// batch touched only tables that are gone, or the whole lake is gone)
	// and the outbox no longer holds the pruned rows, so stopping at the
	// frontier would leave the table below its mark (held at its next
	// batch) or, from an empty lake, lose the pruned rows without a trace.
	marks, err := PruneMarks(ctx, d.db)
	if err != nil {
		return err
	}
	if f == 0 && len(marks) == 0 {
		d.markCaughtUp(tenants, scan, nil) // nothing is at or below 0
		return nil
	}
	if scan == nil {
		if scan, err = d.scanTables(ctx, tenants, scanOptions{}); err != nil {
			return err
		}
	}
	d.heldMu.Lock()
	held := d.held
	d.heldMu.Unlock()
	var behind, rebuild []catchUpRange
	for _, t := range tenants {
		if _, ok := held[t]; ok {
			continue
		}
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: t, Kind: k}
			if d.isHeldTable(key) {
				continue
			}
			v := int64(0)
			if s := scan.get(key); s != nil && s.hasTxn {
				v = s.txn
			} else if s == nil && !scan.absent[key] {
				continue // held by the scan for a fault of its own
			}
			switch {
			case v == 0 && marks[key] > f:
				rebuild = append(rebuild, catchUpRange{key: key, to: marks[key]})
			case v < f:
				behind = append(behind, catchUpRange{key: key, from: v, to: f})
			}
		}
	}
	// A table below its prune mark also misses the rows prune deleted:
	// from nothing they are re-derived from the journal (rederive.go);
	// from a txn version below the mark the load refuses and the table is
	// held (through.go).
	probes := make([]outbox.TableProbe, len(behind))
	for i, p := range behind {
		probes[i] = outbox.TableProbe{Tenant: p.key.Tenant, Target: string(p.key.Kind), After: p.from}
	}
	missed, err := outbox.TablesHaveRows(ctx, d.db, probes, f)
	if err != nil {
		return fmt.Errorf("look for rows the tables missed: %w", err)
	}
	for _, i := range missed {
		rebuild = append(rebuild, behind[i])
	}
	for _, c := range rebuild {
		d.log.Info("catching a table up to the frontier", "table", c.key.String(), "from", c.from, "to", c.to)
		scope := c.key
		if _, err := d.applyRange(ctx, c.from, c.to, &scope, nil); err != nil {
			if classify(err) == faultTable {
				d.holdTable(ctx, c.key, err)
				continue
			}
			return fmt.Errorf("catch %s up to %d: %w", c.key, c.to, err)
		}
	}
	d.markCaughtUp(tenants, scan, rebuild)
	return nil
}

// markCaughtUp records that every table of tenants that is not held now
// holds all its rows up to the frontier at the txn version scan read
// (complete.go): catchUp has just made it so. The tables it caught up
// are left alone: their catch-up commit recorded its own txn version.
func (d *Drainer) markCaughtUp(tenants []uuid.UUID, scan *tableScan, caught []catchUpRange) {
	if scan == nil {
		return // nothing known of the tables: they are probed
	}
	held := map[uuid.UUID]bool{}
	d.heldMu.Lock()
	for t := range d.held {
		held[t] = true
	}
	d.heldMu.Unlock()
	skip := make(map[tables.TableKey]bool, len(caught))
	for _, c := range caught {
		skip[c.key] = true
	}
	for _, t := range tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: t, Kind: k}
			if skip[key] || held[t] || d.isHeldTable(key) {
				continue
			}
			txn := int64(-1) // no table, or none of the lake writer's commits: applyTable's "applied"
			if s := scan.get(key); s != nil && s.hasTxn {
				txn = s.txn
			} else if s == nil && !scan.absent[key] {
				continue // the scan held it
			}
			d.markComplete(key, txn)
		}
	}
}

// currentSigner is the signing key to use for one signed thing (a
// materialize.skipped, a batch of witnessed heads): a reloading key file
// (keys.Reloading) is asked once, so one key's id never meets another
// key's signature, and a rotated key file is picked up without a restart.
func (d *Drainer) currentSigner() chain.Signer {
	if r, ok := d.opts.Signer.(interface{ Current() *keys.Key }); ok {
		return r.Current()
	}
	return d.opts.Signer
}

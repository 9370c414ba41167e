package lakewriter

import (
	"context"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/tables"
)

// The continuity check inside the writer (see continuity.go).

// positions reads every table's txn version (tables that do not exist are
// left out), from the start-up scan when there is one.
func (d *Drainer) positions(ctx context.Context, tenants []uuid.UUID, scan *tableScan) ([]TablePosition, error) {
	if scan == nil {
		var err error
		if scan, err = d.scanTables(ctx, tenants, scanOptions{}); err != nil {
			return nil, err
		}
	}
	var out []TablePosition
	for _, t := range tenants {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: t, Kind: k}
			s := scan.get(key)
			if s == nil || !s.hasTxn || d.isHeldTable(key) {
				continue // absent, or held: not written, so nothing of it to check (faults.go)
			}
			out = append(out, TablePosition{Key: key, TxnVersion: s.txn, rec: s.rec})
		}
	}
	return out, nil
}

// checkContinuity runs the full check and turns a disagreement into the
// writer's refusal (logged, counted, and returned as *ContinuityError).
func (d *Drainer) checkContinuity(ctx context.Context, tenants []uuid.UUID, scan *tableScan) error {
	if tenants == nil {
		var err error
		if tenants, err = d.tenants(ctx); err != nil {
			return err
		}
	}
	pos, err := d.positions(ctx, tenants, scan)
	if err != nil {
		return err
	}
	c, err := CheckContinuity(ctx, d.db, d.opts.Lake, pos)
	if err != nil {
		return err
	}
	if !c.OK() {
		d.opts.Metrics.continuity(false)
		d.log.Error("refusing to write: the lake and the database do not share their history",
			"state", c.State, "detail", c.Detail, "last_agreed_seq", c.LastAgreedSeq,
			"lake_position", c.LakePosition, "lake_timeline", c.LakeTimeline, "lake_system_identifier", c.LakeSystemIdentifier,
			"database_seq", c.DB.LastSeq, "database_timeline", c.DB.Timeline, "database_system_identifier", c.DB.SystemIdentifier,
			"tables", len(c.Tables), "runbook", "docs/runbooks/continuity.md")
		return &ContinuityError{C: c}
	}
	d.opts.Metrics.continuity(true)
	d.contMu.Lock()
	d.verified = c.DB
	d.contMu.Unlock()
	return ensureDeployment(ctx, d.db, d.opts.Lake, c.DB)
}

// beforeBatch is the per-batch check (also run with an empty range at the
// start of every DrainOnce and whenever the loop sees the database's
// sequence behind the frontier): in one round trip it reads the
// database's identity, the record this batch will carry, and the row at
// the previous batch's anchor. Only when something moved (another system
// identifier or timeline, the outbox sequence below the frontier, the
// previous anchor gone or changed) does it run the full check.
func (d *Drainer) beforeBatch(ctx context.Context, from, to int64) (tables.BatchBounds, error) {
	rec, _, _, err := d.checkBatch(ctx, from, to)
	return rec, err
}

// checkBatch is beforeBatch that also returns the identity it read and
// whether the database moved (the full check ran, and passed): a batch
// read ahead is committed only when nothing moved (prefetch.go).
func (d *Drainer) checkBatch(ctx context.Context, from, to int64) (_ tables.BatchBounds, _ Identity, moved bool, _ error) {
	d.contMu.Lock()
	prev, verified := d.lastAnchor, d.verified
	d.contMu.Unlock()
	rec, id, now, err := readBatchRecord(ctx, d.db, from, to, prev)
	if err != nil {
		return rec, id, false, err
	}
	d.contMu.Lock()
	if c := d.cutRows; c != nil && c.Start == from && c.End == to {
		rec.Rows = c.Rows
	}
	d.contMu.Unlock()
	same := id.SystemIdentifier == verified.SystemIdentifier && id.Timeline == verified.Timeline &&
		id.LastSeq >= d.frontier.Load() && id.LastSeq >= to
	if prev != nil && (now == nil || now.Digest != prev.Digest) {
		same = false
		if now == nil {
			// Gone: `oml outbox prune` may have deleted it (the row was
			// applied everywhere). Its journal event, committed with it,
			// says whether this is still the same history (checkAnchor);
			// a lost row takes its event with it.
			v, err := checkAnchor(ctx, d.db, prev)
			if err != nil {
				return rec, id, false, err
			}
			same = v == anchorAgrees && id.SystemIdentifier == verified.SystemIdentifier && id.Timeline == verified.Timeline &&
				id.LastSeq >= d.frontier.Load() && id.LastSeq >= to
		}
	}
	if !same {
		d.log.Warn("the database moved under the lake writer (system identifier, timeline or recorded rows changed); checking continuity before the batch",
			"timeline", id.Timeline, "verified_timeline", verified.Timeline, "outbox_seq", id.LastSeq, "frontier", d.frontier.Load())
		if err := d.checkContinuity(ctx, nil, nil); err != nil {
			return rec, id, true, err
		}
	}
	return rec, id, !same, nil
}

// setCutRows remembers how many outbox rows the cut of (from, to] found,
// for the record of that batch (a replayed batch passes the count its
// first commits recorded).
func (d *Drainer) setCutRows(from, to int64, rows *int64) {
	d.contMu.Lock()
	d.cutRows = &tables.BatchBounds{Start: from, End: to, Rows: rows}
	d.contMu.Unlock()
}

func (d *Drainer) setRecord(rec tables.BatchBounds) {
	d.contMu.Lock()
	d.current = &rec
	d.contMu.Unlock()
}

// commitRecord is the commitInfo.omlBatch of a commit of (from, to].
func (d *Drainer) commitRecord(from, to int64, catchUp bool) tables.BatchBounds {
	d.contMu.Lock()
	defer d.contMu.Unlock()
	b := tables.BatchBounds{Start: from, End: to}
	if d.current != nil && d.current.Start == from && d.current.End == to {
		b = *d.current
	}
	b.CatchUp = catchUp
	return b
}

func (d *Drainer) batchApplied(rec tables.BatchBounds) {
	if rec.Anchor == nil {
		return
	}
	d.contMu.Lock()
	d.lastAnchor = rec.Anchor
	d.contMu.Unlock()
}

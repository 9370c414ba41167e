package lakewriter

import (
	"context"
	"errors"
	"time"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
)

// The durability fence (Options.Durable, `--durable-on`): the writer cuts
// batches only from the part of the stable prefix whose commit records the
// required streaming standbys have flushed, so a failover to one of them
// never hands it a database behind the lake. See internal/outbox's package
// doc for why the position is the WAL insert position read after the fence
// was seen final, and why the wait comes before the cut.

// durableFence is a final fence waiting for the standbys: its prefix
// through seq is final on the primary, and covered by lsn.
type durableFence struct {
	seq int64
	lsn replication.LSN
}

// maxPendingFences bounds the queue of final fences the loop keeps while a
// standby lags; past it the newest entry is replaced, which only makes the
// frontier advance in coarser steps when the standby catches up.
const maxPendingFences = 64

type pendingFences []durableFence

func (p *pendingFences) add(f durableFence) {
	if n := len(*p); n > 0 && (*p)[n-1].seq >= f.seq {
		return
	}
	if len(*p) >= maxPendingFences {
		(*p)[len(*p)-1] = f
		return
	}
	*p = append(*p, f)
}

// newest is the seq of the newest queued fence (0: none).
func (p pendingFences) newest() int64 {
	if len(p) == 0 {
		return 0
	}
	return p[len(p)-1].seq
}

// pop removes the fences durable accepts (oldest first, stopping at the
// first it does not) and returns the largest seq among them (0: none).
func (p *pendingFences) pop(durable func(replication.LSN) bool) int64 {
	var seq int64
	i := 0
	for ; i < len(*p) && durable((*p)[i].lsn); i++ {
		seq = (*p)[i].seq
	}
	*p = (*p)[i:]
	return seq
}

// verdict reads pg_stat_replication once and applies the policy to lsn.
func (d *Drainer) verdict(ctx context.Context, lsn replication.LSN) (replication.Verdict, replication.Reading, error) {
	r, err := replication.Read(ctx, d.db)
	if err != nil {
		return replication.Verdict{}, r, err
	}
	v, err := replication.Evaluate(d.opts.Durable, lsn, r)
	return v, r, err
}

// waitDurable polls the standbys until the policy holds for lsn or timeout
// passes (then it returns the last verdict, not durable). A failed reading
// is an outage: it backs off and retries inside the same timeout. A
// *replication.HiddenError (the role cannot see the standbys) is returned
// at once: it is configuration, and waiting cannot fix it.
func (d *Drainer) waitDurable(ctx context.Context, lsn replication.LSN, timeout time.Duration) (replication.Verdict, error) {
	if !d.opts.Durable.Waits() {
		return replication.Verdict{Policy: d.opts.Durable.String(), LSN: lsn, Durable: true}, nil
	}
	deadline := time.Now().Add(timeout)
	logged := false
	for attempt := 0; ; {
		v, _, err := d.verdict(ctx, lsn)
		var hidden *replication.HiddenError
		switch {
		case errors.As(err, &hidden):
			return v, err
		case err != nil:
			if time.Now().After(deadline) {
				return v, err
			}
			if werr := d.outage(ctx, "read pg_stat_replication", err, attempt); werr != nil {
				return v, werr
			}
			attempt++
			continue
		}
		d.reportDurability(v)
		if v.Durable {
			if logged {
				d.log.Info("the standbys have flushed the stable prefix; going on", "lsn", lsn.String())
			}
			return v, nil
		}
		if !logged {
			d.log.Warn("waiting for standbys to flush the stable prefix before cutting a batch (lag, not loss)",
				"reason", v.Reason, "lsn", lsn.String(), "policy", v.Policy)
			logged = true
		}
		if time.Now().After(deadline) {
			return v, nil
		}
		if err := sleep(ctx, min(d.opts.Poll, 50*time.Millisecond)); err != nil {
			return v, err
		}
	}
}

// settleDurable is the loop's step: when final fences wait, it reads the
// standbys once, removes the fences they now hold and returns the largest
// seq both final and durable (0: none new), logging the wait's start, every
// 30s of it, and its end. It never sleeps.
func (d *Drainer) settleDurable(ctx context.Context, pending *pendingFences) (int64, error) {
	if len(*pending) == 0 {
		return 0, nil
	}
	newest := (*pending)[len(*pending)-1]
	v, r, err := d.verdict(ctx, newest.lsn)
	if err != nil {
		return 0, err
	}
	d.reportDurability(v)
	seq := pending.pop(func(lsn replication.LSN) bool {
		ev, err := replication.Evaluate(d.opts.Durable, lsn, r)
		return err == nil && ev.Durable
	})
	now := time.Now()
	switch {
	case !v.Durable && d.durableWaitSince.IsZero():
		d.durableWaitSince, d.durableLoggedAt = now, now
		d.log.Warn("waiting for standbys to flush the stable prefix before cutting a batch (lag, not loss)",
			"reason", v.Reason, "lsn", newest.lsn.String(), "policy", v.Policy)
	case !v.Durable && now.Sub(d.durableLoggedAt) >= 30*time.Second:
		d.durableLoggedAt = now
		d.log.Warn("still waiting for standbys to flush the stable prefix (lag, not loss)",
			"reason", v.Reason, "lsn", newest.lsn.String(), "since", d.durableWaitSince)
	case v.Durable && !d.durableWaitSince.IsZero():
		d.log.Info("the standbys have flushed the stable prefix; going on", "waited", now.Sub(d.durableWaitSince).Round(time.Millisecond).String())
		d.durableWaitSince = time.Time{}
	}
	return seq, nil
}

// coverFence reads the WAL position covering a fence just seen final.
func (d *Drainer) coverFence(ctx context.Context, f outbox.Fence) (durableFence, error) {
	lsn, err := outbox.CoverLSN(ctx, d.db)
	return durableFence{seq: f.LastSeq, lsn: lsn}, err
}

// Durability is the last verdict of the durability fence (nil before the
// first one, and with --durable-on none).
func (d *Drainer) Durability() *replication.Verdict {
	d.durableMu.Lock()
	defer d.durableMu.Unlock()
	if d.lastVerdict == nil {
		return nil
	}
	v := *d.lastVerdict
	return &v
}

func (d *Drainer) reportDurability(v replication.Verdict) {
	d.durableMu.Lock()
	d.lastVerdict = &v
	d.durableMu.Unlock()
	d.opts.Metrics.durability(v)
}

// durabilityWhileHeld: the horizon held the pass back, but whether the
// standbys are behind is a second, independent fact the operator needs
// (the pass would wait for them next), so it is read once, without
// waiting, at the WAL position covering every commit so far. A reading
// that fails or cannot see the standbys leaves the summary without it: the
// horizon is what held this pass.
func (d *Drainer) durabilityWhileHeld(ctx context.Context, fence outbox.Fence, sum *Summary) {
	if !d.opts.Durable.Waits() || fence.LastSeq <= d.frontier.Load() {
		return
	}
	lsn, err := outbox.CoverLSN(ctx, d.db)
	if err != nil {
		return
	}
	v, _, err := d.verdict(ctx, lsn)
	if err != nil {
		return
	}
	d.reportDurability(v)
	sum.Durability = &v
	sum.DurabilityHeld = !v.Durable
}

package lakewriter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/omlhq/oml/internal/backoff"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
)

// DrainOnce drains up to the stable prefix seen at its start and returns
// (the cron mode, `oml lake drain --once`). If a transaction holds the
// snapshot horizon behind the fence for longer than HorizonTimeout, it
// returns without draining past the frontier and names the blockers: that
// is lag, never loss. A poison row inside its budget is retried with
// backoff; an outage too, for at most MaxOutage (then an *OutageError); a
// configuration error (store.ErrConfig) returns at once. DrainOnce always
// ends.
func (d *Drainer) DrainOnce(ctx context.Context) (Summary, error) {
	started := time.Now()
	var sum Summary
	d.outageLimit = d.opts.MaxOutage
	defer func() { d.outageLimit = 0 }()
	release, ctx, err := d.hold(ctx)
	if err != nil {
		return sum, err
	}
	defer release()
	recoverStart := time.Now()
	if err := d.retry(ctx, "recover", d.recover); err != nil {
		return sum, err
	}
	sum.RecoverDuration = time.Since(recoverStart)
	if r := d.replayed; r != nil {
		// The replay is reported apart (Summary.Replayed): its rows are not
		// new, but what it committed and dead-lettered happened in this run.
		sum.Replayed = r
		sum.TableCommits += r.Tables
		sum.DeadLettered = append(sum.DeadLettered, r.DeadLettered...)
		d.replayed = nil
	}
	sum.StartFrontier, sum.EndFrontier = d.frontier.Load(), d.frontier.Load()
	// A writer recovered by an earlier run skips recover's full check;
	// the quick one tells whether the database moved since (a failover
	// between two runs leaves no batch to check before).
	if _, err := d.beforeBatch(ctx, d.frontier.Load(), d.frontier.Load()); err != nil {
		return sum, err
	}

	var fence outbox.Fence
	var final bool
	err = d.retry(ctx, "fence", func(ctx context.Context) error {
		var err error
		if fence, err = outbox.TakeFence(ctx, d.db); err != nil {
			return err
		}
		final, err = d.waitFinal(ctx, fence, d.opts.HorizonTimeout)
		return err
	})
	if err != nil {
		return sum, err
	}
	if final {
		d.finalXid.Store(fence.Xid)
	}
	if !final {
		sum.HorizonHeld = true
		sum.Blockers, _ = outbox.Blockers(ctx, d.db, fence.Xid, 5)
		sum.Target = d.frontier.Load()
		d.waitWitness(ctx) // the replay's witnesses, and any fork they found
		sum.Refused = d.Refused()
		sum.HeldTables = d.HeldTables()
		d.durabilityWhileHeld(ctx, fence, &sum)
		sum.Duration = time.Since(started)
		d.log.Warn("a transaction holds the snapshot horizon; nothing past the frontier is final yet (lag, not loss)",
			"frontier", d.frontier.Load(), "fence_seq", fence.LastSeq, "blockers", len(sum.Blockers))
		return sum, nil
	}
	// The durability fence: only what the required standbys flushed (and
	// nothing to wait for when nothing new is there to cut).
	v := replication.Verdict{Durable: true}
	if fence.LastSeq > d.frontier.Load() {
		cover, err := d.coverFence(ctx, fence)
		if err != nil {
			return sum, err
		}
		if v, err = d.waitDurable(ctx, cover.lsn, d.opts.DurableTimeout); err != nil {
			return sum, err
		}
		if d.opts.Durable.Waits() {
			sum.Durability = &v
		}
	}
	if !v.Durable {
		sum.DurabilityHeld = true
		sum.Target = d.frontier.Load()
		d.waitWitness(ctx)
		sum.Refused = d.Refused()
		sum.Duration = time.Since(started)
		d.log.Warn("the standbys have not flushed the stable prefix; nothing past the frontier is cut (lag, not loss)",
			"frontier", d.frontier.Load(), "fence_seq", fence.LastSeq, "reason", v.Reason)
		return sum, nil
	}
	target := fence.LastSeq
	if d.opts.StopAt > 0 && d.opts.StopAt < target {
		target = d.opts.StopAt
	}
	sum.Target = target
	stopAhead := d.startPipeline(ctx) // the next batch is read while one commits (prefetch.go)
	defer stopAhead()
	for d.frontier.Load() < target {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		var end int64
		var n int
		err := d.retry(ctx, "cut", func(ctx context.Context) error {
			var err error
			end, n, err = d.cut(ctx, target)
			return err
		})
		if err != nil {
			return sum, err
		}
		rows := int64(n)
		d.setCutRows(d.frontier.Load(), end, &rows)
		res, err := d.runBatch(ctx, d.frontier.Load(), end)
		if errors.Is(err, errRecut) {
			continue // nothing of it was written: cut it again
		}
		if err != nil {
			return sum, err
		}
		sum.Batches++
		sum.Rows += res.Rows
		sum.TableCommits += res.Tables
		sum.DeadLettered = append(sum.DeadLettered, res.DeadLettered...)
		sum.EndFrontier = d.frontier.Load()
	}
	sort.Slice(sum.DeadLettered, func(i, j int) bool { return sum.DeadLettered[i] < sum.DeadLettered[j] })
	// --once publishes the witnesses of its last batches before it
	// returns, and reports the forks they found.
	d.waitWitness(ctx)
	sum.Refused = d.Refused()
	sum.HeldTables = d.HeldTables()
	sum.Duration = time.Since(started)
	c := d.tables.counts()
	d.log.Debug("table writers", "open", c.Open, "evictions", c.Evictions, "opened_from_log", c.LogOpens,
		"rebuilt_from_state", c.StateOpens, "states", c.States, "state_bytes", c.StateBytes)
	return sum, nil
}

// Run is the long-running writer (`oml lake drain` under systemd): it waits
// for the lease, recovers, then cuts and applies batches until ctx ends,
// stopping cleanly between batches. It returns nil on a clean stop.
func (d *Drainer) Run(ctx context.Context) error {
	for {
		err := d.runLeader(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var nl *NotLeaderError
		if errors.As(err, &nl) {
			d.log.Info("waiting for the lake writer lease", "holder", nl.Holder.Holder, "host", nl.Holder.Host,
				"pid", nl.Holder.PID, "expires_at", nl.Holder.ExpiresAt)
			if sleep(ctx, d.opts.LeaseTTL/2) != nil {
				return nil
			}
			continue
		}
		var ce *ContinuityError
		if errors.As(err, &ce) {
			// Keep refusing, visibly: the error was logged and the gauge set
			// by the check; look again later (an operator may have repaired
			// the lake or pointed the writer at the right database).
			d.log.Error("lake writer refuses to write; checking continuity again later", "error", err, "retry_in", d.opts.ContinuityRecheck)
			d.recovered = false
			if sleep(ctx, d.opts.ContinuityRecheck) != nil {
				return nil
			}
			continue
		}
		if errors.Is(err, errLeaseLost) {
			d.log.Warn("lost the lake writer lease; stopped writing and waiting to take it again")
			d.recovered = false
			continue
		}
		return err
	}
}

var errLeaseLost = errors.New("lake writer lease lost")

func (d *Drainer) runLeader(ctx context.Context) error {
	release, ctx, err := d.hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := d.retry(ctx, "recover", d.recover); err != nil {
		return err
	}
	stopAhead := d.startPipeline(ctx) // the next batch is read while one commits (prefetch.go)
	defer stopAhead()
	defer d.stopRecheck() // a fork check beside the batches ends with the loop (forkrecheck.go)
	var (
		fence        outbox.Fence
		haveFence    bool
		stable       = d.frontier.Load()
		pendingSince time.Time
		waiting      pendingFences // final fences the standbys have not flushed yet
	)
	for {
		if err := ctx.Err(); err != nil {
			return leaseErr(ctx, err)
		}
		if !haveFence {
			f, err := outbox.TakeFence(ctx, d.db)
			if err != nil {
				if werr := d.outage(ctx, "fence", err, 0); werr != nil {
					return leaseErr(ctx, werr)
				}
				continue
			}
			fence, haveFence = f, true
		}
		h, err := outbox.Horizon(ctx, d.db)
		if err != nil {
			if werr := d.outage(ctx, "horizon", err, 0); werr != nil {
				return leaseErr(ctx, werr)
			}
			continue
		}
		if err := d.maybeRecheckForks(ctx); err != nil {
			if werr := d.outage(ctx, "fork check", err, 0); werr != nil {
				return leaseErr(ctx, werr)
			}
			continue
		}
		if fence.LastSeq < d.frontier.Load() {
			// The database's sequence is behind the lake: a failover or a
			// restore under the running writer. Check before anything else.
			if _, err := d.beforeBatch(ctx, d.frontier.Load(), d.frontier.Load()); err != nil {
				return leaseErr(ctx, err)
			}
		}
		blocked := false
		if fence.Final(h) {
			d.finalXid.Store(fence.Xid)
			if fence.LastSeq > max(stable, waiting.newest()) {
				if !d.opts.Durable.Waits() {
					stable = fence.LastSeq
				} else if c, err := d.coverFence(ctx, fence); err != nil {
					if werr := d.outage(ctx, "WAL position", err, 0); werr != nil {
						return leaseErr(ctx, werr)
					}
					continue
				} else {
					waiting.add(c)
				}
			}
			haveFence = false // take a fresh one next round
		} else {
			blocked = true
		}
		if seq, err := d.settleDurable(ctx, &waiting); err != nil {
			var hidden *replication.HiddenError
			if errors.As(err, &hidden) {
				return err // configuration: waiting cannot fix it
			}
			if werr := d.outage(ctx, "read pg_stat_replication", err, 0); werr != nil {
				return leaseErr(ctx, werr)
			}
			continue
		} else if seq > stable {
			stable = seq
		}
		d.reportLag(ctx, blocked)

		if stable > d.frontier.Load() {
			end, n, err := d.cut(ctx, stable)
			if err != nil {
				if werr := d.outage(ctx, "cut", err, 0); werr != nil {
					return leaseErr(ctx, werr)
				}
				continue
			}
			if pendingSince.IsZero() {
				pendingSince = d.pendingSince(ctx) // fanout.go: as old as its oldest row
			}
			full := end < stable || n >= d.opts.Limits.Rows
			due := full
			if age := time.Since(pendingSince); !full && age >= d.opts.MaxWait {
				due = true
				if age < fanoutWaitFactor*d.opts.MaxWait {
					// A small batch over many tables is many tiny commits:
					// give it a while longer to fill (fanout.go).
					t, err := outbox.PendingTables(ctx, d.db, d.frontier.Load(), end)
					if err != nil {
						if werr := d.outage(ctx, "cut", err, 0); werr != nil {
							return leaseErr(ctx, werr)
						}
						continue
					}
					due = cutDue(n, t, age, d.opts.MaxWait)
				}
			}
			if due {
				rows := int64(n)
				d.setCutRows(d.frontier.Load(), end, &rows)
				if _, err := d.runBatch(ctx, d.frontier.Load(), end); errors.Is(err, errRecut) {
					continue // nothing of it was written: cut it again
				} else if err != nil {
					return leaseErr(ctx, err)
				}
				if d.frontier.Load() >= stable {
					pendingSince = time.Time{}
				}
				continue // stop point between batches: the loop re-checks ctx
			}
		}
		if sleep(ctx, d.opts.Poll) != nil {
			return leaseErr(ctx, ctx.Err())
		}
	}
}

func leaseErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errLeaseLost) {
		return errLeaseLost
	}
	return err
}

// runBatch applies (from, end] and retries the same bounds until it
// succeeds: outages and poison rows inside their budget back off; the
// bounds never change on a retry.
func (d *Drainer) runBatch(ctx context.Context, from, end int64) (BatchResult, error) {
	var res BatchResult
	var dead []int64
	var outageSince time.Time
	for attempt := 0; ; attempt++ {
		start := time.Now()
		r, err := d.processBatch(ctx, from, end)
		dead = append(dead, r.DeadLettered...)
		if err == nil {
			r.DeadLettered = dead
			return r, nil
		}
		res = r
		if errors.Is(err, errRecut) {
			return res, err // nothing of it was written (prefetch.go)
		}
		d.stateChanged() // a retry: what was read ahead during the attempt is read again
		if errors.Is(err, ErrCrashed) || errors.Is(err, ErrNoSigner) || isContinuity(err) || ctx.Err() != nil {
			res.DeadLettered = dead
			return res, interrupted(ctx, err)
		}
		if !errors.Is(err, errPoisonRetry) {
			if outageSince.IsZero() {
				outageSince = start
			}
			if werr := d.wait(ctx, fmt.Sprintf("batch (%d, %d]", from, end), err, attempt, &outageSince); werr != nil {
				res.DeadLettered = dead
				return res, werr
			}
			continue
		}
		outageSince = time.Time{}
		d.log.Warn("batch failed; retrying the same bounds", "start", from, "end", end, "attempt", attempt+1,
			"reason", "poison", "error", err)
		if werr := sleep(ctx, d.backoff(attempt)); werr != nil {
			return res, werr
		}
	}
}

// retry runs fn until it succeeds, backing off on errors (wait).
func (d *Drainer) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	var since time.Time
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := fn(ctx)
		if err == nil || errors.Is(err, ErrCrashed) || isContinuity(err) || ctx.Err() != nil {
			return interrupted(ctx, err)
		}
		if since.IsZero() {
			since = start // the outage began with the attempt that failed
		}
		if werr := d.wait(ctx, what, err, attempt, &since); werr != nil {
			return werr
		}
	}
}

// outage is wait for the long-running loop's steps (no outage limit).
func (d *Drainer) outage(ctx context.Context, what string, err error, attempt int) error {
	return d.wait(ctx, what, err, attempt, nil)
}

// wait decides, by whose fault err is (faults.go), whether to back off and
// retry step what or to give up: a configuration error ends DrainOnce at
// once and is reported and backed off in the loop; an outage is waited out,
// in DrainOnce for at most MaxOutage counted from *since (the first failure
// of the step; nil: no limit). It returns nil to retry.
func (d *Drainer) wait(ctx context.Context, what string, err error, attempt int, since *time.Time) error {
	if classify(err) == faultConfig {
		if d.outageLimit > 0 {
			return err
		}
		d.opts.Metrics.retry("config")
		d.log.Error("the lake store refuses the writer's configuration; fix it (nothing is written meanwhile), retrying with backoff",
			"step", what, "attempt", attempt+1, "error", err)
		return sleep(ctx, d.backoff(attempt))
	}
	if since != nil {
		if since.IsZero() {
			*since = time.Now()
		}
		if waited := time.Since(*since); d.outageLimit > 0 && waited >= d.outageLimit {
			return &OutageError{Step: what, Waited: waited, Err: err}
		}
	}
	d.opts.Metrics.retry("outage")
	d.log.Warn("lake writer step failed; backing off and retrying", "step", what, "attempt", attempt+1, "error", err)
	b := d.backoff(attempt)
	if since != nil && d.outageLimit > 0 {
		// Never sleep past the limit: the last attempt falls on it.
		b = max(0, min(b, d.outageLimit-time.Since(*since)))
	}
	return sleep(ctx, b)
}

func (d *Drainer) backoff(attempt int) time.Duration {
	return backoff.Policy{Min: d.opts.BackoffMin, Max: d.opts.BackoffMax, Jitter: backoff.Half}.Delay(attempt)
}

// waitFinal polls the horizon until the fence is final or timeout passes.
func (d *Drainer) waitFinal(ctx context.Context, f outbox.Fence, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		h, err := outbox.Horizon(ctx, d.db)
		if err != nil {
			return false, err
		}
		if f.Final(h) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleep(ctx, min(d.opts.Poll, 50*time.Millisecond)); err != nil {
			return false, err
		}
	}
}

// hold takes the lease (unless disabled) and keeps it alive in the
// background; the returned context is cancelled if the lease is lost.
// release first waits for the witness publication in flight (witness.go;
// bounded once the run's context has ended), so no return of DrainOnce or
// of the leader loop — a stop, a lost lease, an error — leaves one running.
func (d *Drainer) hold(ctx context.Context) (release func(), _ context.Context, _ error) {
	if d.lease == nil { // no lease (tests, a single-writer deployment): this writer drains
		d.opts.Metrics.leaseHeld(true)
		return func() {
			d.waitWitness(ctx)
			d.opts.Metrics.leaseHeld(false)
		}, ctx, nil
	}
	if err := d.lease.acquire(ctx); err != nil {
		return nil, ctx, err
	}
	d.opts.Metrics.leaseHeld(true)
	lctx, stop := d.lease.keep(ctx, d.opts.LeaseTTL, func() { d.opts.Metrics.leaseHeld(false) },
		func(err error) { d.log.Warn("could not renew the lake writer lease; will retry", "error", err) })
	return func() {
		d.waitWitness(lctx)
		stop()
		d.lease.release(context.WithoutCancel(ctx))
		d.opts.Metrics.leaseHeld(false)
	}, lctx, nil
}

func (d *Drainer) reportLag(ctx context.Context, blocked bool) {
	if d.opts.Metrics == nil {
		return
	}
	last, age, _ := outbox.Lag(ctx, d.db, d.frontier.Load())
	d.opts.Metrics.lag(max(0, last-d.frontier.Load()), age, blocked)
	d.opts.Metrics.heldTenants(d.Refused())
}

func sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }

// isContinuity reports a refusal of the continuity check: not an outage,
// so never retried as one.
func isContinuity(err error) bool {
	var ce *ContinuityError
	return errors.As(err, &ce)
}

// interrupted makes an error that coincided with the end of ctx say so: a
// step that failed because (or while) the run was stopped is an
// interruption, not an outage or a poison row, whatever it returned.
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) || errors.Is(err, ErrCrashed) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}

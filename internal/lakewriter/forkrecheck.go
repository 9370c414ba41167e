package lakewriter

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chainverify"
)

// The fork check of the long-running loop runs beside the batches. Every
// ForkCheckInterval the loop compares every tenant's journal with its
// newest witnessed head again; at 10,000 tenants that reads 10,000
// tenants' witnesses and bronze heads and took 10–28 s on the 2-core VM,
// and run on the batch path it held every batch back that long once a
// minute (the p99 of the steady-state lag was that stall). Now the check
// reads on its own goroutine, with the chainverify reader of its own (it
// shares no table writer with the batches), and the loop takes its result
// between two batches:
//
//   - It waits for the witness pass in flight when it starts, as the
//     check at start waits for the publication: a witness that pass is
//     putting (a head the lake may not hold yet, whose events a failover
//     then lost) is read. Passes that start later sign heads read from
//     the journal after the check started, which the check's own journal
//     read is no older than.
//   - A tenant a publication holds while the check runs (fork evidence
//     found after the check read that tenant) stays held: setHolds keeps
//     heldDuringCheck. Only tenants held before the check started can be
//     released by it, and their tables are caught up before the next
//     batch, as before.
//   - What is held changes only between batches (the loop's goroutine),
//     so no batch sees half of a check.
//
// What this gives up: a fork that is in the journal when a check starts
// is held once that check ends instead of before the next batch — the
// batches cut while it reads may still commit that tenant's rows, as the
// batches before any periodic check may. The fences that stop a fork's
// rows at once are unchanged: the check at start (synchronous, before
// anything is written) and a publication that finds its witness in
// conflict (the tenant is held at once, mid-batch).
//
// Its bronze anchors come from the writer's memory of what it read and
// committed (bronzeheads.go): reading every bronze table's log and newest
// data file again was most of the check's CPU at 10,000 tenants. Every
// forkFullPassInterval it reads them from the lake again.
//
// Its witnesses come from the writer's publisher where they can
// (witness.NewestRemembered): a tenant whose newest listed witness is the
// one this writer put last, at its size, under a key the provider chain
// still issues for it, is compared with the head the publisher remembers,
// not read and verified again. Reading and verifying every tenant's newest
// witness was three quarters of the check's CPU at 10,000 tenants (the
// verified-signature cache misses: nearly every tenant has a new witness
// each minute), a burst of 2.3–3.3 s of both cores beside the batches in
// the steady state of BenchmarkFrontierLag, where the batches have little
// margin. The publisher trusts what it put more than a copy read back
// (witness.Publisher), and a witness of another writer, or one rewritten
// to another size, is the newest listed object or not ours, and is read.
// The check at start reads every witness.
//
// The tables held for a fault of their own are read again first, on the
// loop's goroutine (recheckHeldTables: one open per held table, usually
// none), and those it releases are caught up at once.

// forkRecheck is a fork check running beside the batches.
type forkRecheck struct {
	done   chan struct{} // closed when res and err are set
	cancel context.CancelFunc
	res    *chainverify.ForkCheckResult
	err    error
	full   bool          // every bronze anchor read from the lake
	took   time.Duration // the read, for the log
}

// maybeRecheckForks starts the periodic fork check when it is due, and
// applies its result once it has ended; it never waits for it.
func (d *Drainer) maybeRecheckForks(ctx context.Context) error {
	if r := d.recheck; r != nil {
		select {
		case <-r.done:
		default:
			return nil // still reading: the batches go on
		}
		d.recheck = nil
		return d.applyRecheck(ctx, r)
	}
	d.heldMu.Lock()
	due := time.Since(d.lastForkCheck) >= d.opts.ForkCheckInterval
	d.heldMu.Unlock()
	if !due {
		return nil
	}
	if err := d.recheckTables(ctx); err != nil {
		return err
	}
	if d.opts.NoForkCheck {
		d.noForkCheck()
		return nil
	}
	d.startRecheck(ctx)
	return nil
}

// recheckTables reads the held tables again (those this writer holds and
// those the lake records) and catches up those that read again.
func (d *Drainer) recheckTables(ctx context.Context) error {
	released, err := d.recheckHeldTables(ctx)
	if err != nil {
		return err
	}
	tenants := make([]uuid.UUID, 0, len(released))
	for _, k := range released {
		tenants = append(tenants, k.Tenant)
	}
	return d.catchUpReleased(ctx, tenants)
}

// startRecheck starts the fork check on its own goroutine.
func (d *Drainer) startRecheck(ctx context.Context) {
	rctx, cancel := context.WithCancel(ctx)
	r := &forkRecheck{done: make(chan struct{}), cancel: cancel}
	d.heldMu.Lock()
	d.heldDuringCheck = map[uuid.UUID]chainverify.Finding{}
	d.heldMu.Unlock()
	d.recheck = r
	// The bronze anchors come from what this writer read and committed
	// (bronzeheads.go); one every forkFullPassInterval reads them all
	// from the lake.
	read := d.bronzeSeen.reader(d.opts.Lake)
	if r.full = time.Since(d.lastFullForkRead) >= forkFullPassInterval; r.full {
		read = nil
		d.lastFullForkRead = time.Now()
	}
	go func() {
		defer close(r.done)
		start := time.Now()
		d.waitWitnessPass(rctx)
		r.res, r.err = chainverify.ForkCheckRemembering(rctx, d.db, d.opts.Lake, read, &d.providerTrust, d.witnessPub)
		r.took = time.Since(start)
		d.forkReads.Add(1)
		d.forkReadNanos.Add(int64(r.took))
		if d.onForkRecheck != nil {
			d.onForkRecheck()
		}
	}()
}

// applyRecheck makes the ended check's findings the holds (keeping those
// publications made meanwhile) and catches up the tenants it released.
func (d *Drainer) applyRecheck(ctx context.Context, r *forkRecheck) error {
	d.heldMu.Lock()
	keep := d.heldDuringCheck
	d.heldDuringCheck = nil
	d.heldMu.Unlock()
	if r.err != nil {
		// lastForkCheck is unchanged: the next round starts it again.
		return fmt.Errorf("fork check against the witnessed heads: %w", r.err)
	}
	d.log.Debug("periodic fork check read", "bronze_heads", len(r.res.Bronze), "bronze_from_lake", r.full,
		"seconds", r.took.Seconds())
	d.bronzeSeen.seen(r.res.Bronze)
	return d.catchUpReleased(ctx, d.setHolds(r.res, keep))
}

// catchUpReleased brings the tables of tenants a check released (or whose
// held tables read again) up to the frontier.
func (d *Drainer) catchUpReleased(ctx context.Context, tenants []uuid.UUID) error {
	seen := map[uuid.UUID]bool{}
	var once []uuid.UUID
	for _, t := range tenants {
		if !seen[t] {
			seen[t] = true
			once = append(once, t)
		}
	}
	if len(once) == 0 {
		return nil
	}
	return d.catchUp(ctx, once, nil)
}

// stopRecheck ends a check in flight (the loop is returning): its result
// is dropped, and the next leader's start-up check reads again.
func (d *Drainer) stopRecheck() {
	r := d.recheck
	if r == nil {
		return
	}
	d.recheck = nil
	r.cancel()
	<-r.done
	d.heldMu.Lock()
	d.heldDuringCheck = nil
	d.heldMu.Unlock()
}

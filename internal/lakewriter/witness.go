package lakewriter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/witness"
)

// The witness publisher: signed heads of the tenants the batches touched
// (at most once per WitnessInterval each), so the fork check has a copy of
// every chain head outside PostgreSQL. A witness is best effort for the
// lake (a failed publication is logged and retried, never fails a batch),
// but a conflicting witness is fork evidence: the tenant is held at once.
//
// Publication runs beside the batches, at most one at a time: a batch
// adds the tenants it touched to witnessPending and starts a publication
// if none runs; otherwise the one running publishes once more when it
// ends, taking every pending tenant that is due by then. The writer waits
// for it (waitWitness) where a witness must not be left behind or race:
// before the fork check reads the witnesses, at the end of DrainOnce
// (`oml lake drain --once` publishes everything before it returns) and on
// every return of the leader loop (a hand-over, a lost lease, a stop).
//
// Dropping a publication a stopping writer could not finish in
// witnessFinalWait is safe: its heads were read from PostgreSQL, so a
// later publication (this writer's next run, the next leader, `oml chain
// witness`) witnesses the same chain at the same or a later head. The lake
// is then exactly as after a crash between a batch's frontier update and
// its witnesses, which the synchronous publisher allowed too. A witness
// is never wrong for not being published; the fork check only has less
// recent evidence meanwhile.

// witnessRun is the witness publication in flight.
type witnessRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed once it ended
	again  bool          // a batch ended while it ran: publish once more (under witnessMu)
	// passed is closed when the pass in flight ends, and replaced by the
	// next pass's (under witnessMu): the fork check beside the batches
	// waits for the pass it started during, not for the run, which goes on
	// as long as batches end meanwhile (waitWitnessPass).
	passed chan struct{}
}

// witnessFinalWait bounds the wait for the publication in flight when the
// run stops (its context ended): then it is cancelled (see above).
const witnessFinalWait = 10 * time.Second

// witnessDurableWait bounds the witness publisher's wait for the standbys
// after a batch (the batch itself was already durable when it was cut).
const witnessDurableWait = 5 * time.Second

// witnessInBackground is what a batch does at its end: it notes the tenants
// it touched and starts a publication unless one runs (that one then runs
// again for them). ctx's values are kept, not its end: the publication is
// waited for, bounded, by whoever stops the run (waitWitness).
func (d *Drainer) witnessInBackground(ctx context.Context, touched []tables.TableKey) {
	if !d.noteTouched(touched) {
		return
	}
	if run := d.claimWitness(context.WithoutCancel(ctx)); run != nil {
		go d.runWitness(run)
	}
}

// witnessTouched publishes the due heads of touched now and returns when
// that is done (tests of the durability fence, PublishWitnessesNow).
func (d *Drainer) witnessTouched(ctx context.Context, touched []tables.TableKey) {
	if !d.noteTouched(touched) {
		return
	}
	for ctx.Err() == nil {
		d.waitWitness(ctx)
		if run := d.claimWitness(ctx); run != nil {
			d.runWitness(run)
			return
		}
	}
}

// noteTouched adds the tenants of touched to those waiting for a witness;
// false when heads are not published at all.
func (d *Drainer) noteTouched(touched []tables.TableKey) bool {
	if d.opts.Signer == nil || d.opts.WitnessInterval < 0 || len(touched) == 0 {
		return false
	}
	d.witnessMu.Lock()
	defer d.witnessMu.Unlock()
	if d.witnessPending == nil {
		d.witnessPending = map[uuid.UUID]struct{}{}
	}
	for _, k := range touched {
		d.witnessPending[k.Tenant] = struct{}{}
	}
	return true
}

// claimWitness makes a new publication the one in flight, or, when one
// already runs, asks it to run again and returns nil.
func (d *Drainer) claimWitness(parent context.Context) *witnessRun {
	d.witnessMu.Lock()
	defer d.witnessMu.Unlock()
	if d.witnessRun != nil {
		d.witnessRun.again = true
		return nil
	}
	run := &witnessRun{done: make(chan struct{}), passed: make(chan struct{})}
	run.ctx, run.cancel = context.WithCancel(parent)
	d.witnessRun = run
	return run
}

// runWitness publishes the due tenants, again while batches ended
// meanwhile, then gives up its place.
func (d *Drainer) runWitness(run *witnessRun) {
	defer close(run.done)
	defer run.cancel()
	for {
		d.publishDue(run.ctx)
		d.witnessMu.Lock()
		again := run.again && run.ctx.Err() == nil
		run.again = false
		if !again {
			d.witnessRun = nil
		}
		close(run.passed)
		run.passed = make(chan struct{})
		d.witnessMu.Unlock()
		if !again {
			return
		}
	}
}

// waitWitness returns once no witness publication is in flight. If ctx
// ends first (the run is stopping), the publication gets witnessFinalWait
// more, then is cancelled; it is always over when waitWitness returns.
func (d *Drainer) waitWitness(ctx context.Context) {
	d.witnessMu.Lock()
	run := d.witnessRun
	d.witnessMu.Unlock()
	if run == nil {
		return
	}
	select {
	case <-run.done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(witnessFinalWait)
	defer t.Stop()
	select {
	case <-run.done:
		return
	case <-t.C:
	}
	d.log.Warn("stopping before the witness publication in flight ended; a later publication witnesses those heads",
		"waited", witnessFinalWait)
	run.cancel()
	<-run.done
}

// waitWitnessPass returns once the publication pass in flight when it was
// called has ended (at once when none runs), or ctx ended: every witness
// that pass put is in the store then. Unlike waitWitness it does not wait
// for the passes batches ending meanwhile start.
func (d *Drainer) waitWitnessPass(ctx context.Context) {
	d.witnessMu.Lock()
	run := d.witnessRun
	var passed chan struct{}
	if run != nil {
		passed = run.passed
	}
	d.witnessMu.Unlock()
	if run == nil {
		return
	}
	select {
	case <-passed:
	case <-run.done:
	case <-ctx.Done():
	}
}

// publishDue publishes the heads of the pending tenants that are due. The
// signing key is read once, at the start.
func (d *Drainer) publishDue(ctx context.Context) {
	signer, ok := d.currentSigner().(witness.Signer)
	if !ok {
		return // the tenants stay pending
	}
	now := time.Now()
	due := d.takeDue(now)
	if len(due) == 0 {
		return
	}
	// A due tenant whose head is not published (a store error, heads the
	// standbys do not hold yet, a signing error) is not witnessed: it is
	// pending and due again at the next publication, not an interval later.
	var published, held map[uuid.UUID]bool
	defer func() { d.rearmWitness(due, published, held) }()
	// Only the due tenants' heads: at 20,000 tenants all of them would be
	// about 5 MB held beside the batches, for a publication that signs
	// the few thousand a batch touched.
	dueIDs := make([]uuid.UUID, 0, len(due))
	for t := range due {
		dueIDs = append(dueIDs, t)
	}
	heads, err := witness.CaptureTenants(ctx, d.db, dueIDs, now)
	if err != nil {
		d.log.Warn("could not read chain heads to witness them", "error", err)
		return
	}
	if d.onWitnessCapture != nil {
		d.onWitnessCapture(len(due), len(heads))
	}
	// A witness must not get ahead of what a failover keeps either: the
	// heads just read are covered by the WAL insert position read after
	// them; sign them only once the required standbys flushed it.
	if !d.headsDurable(ctx) {
		return
	}
	// Every head must extend the tenant's earlier witnesses (not only
	// differ from none at its seq), except losses a fork acceptance excuses.
	trusted, err := d.providerTrust.IssuedKeys(ctx, d.db)
	if err != nil {
		d.log.Warn("could not read the issued keys to witness heads", "error", err)
		return
	}
	acc, err := chainverify.ReadAcceptances(ctx, d.db)
	if err != nil {
		d.log.Warn("could not read the fork acceptances to witness heads", "error", err)
		return
	}
	var todo []*witness.Head
	held = map[uuid.UUID]bool{}
	for _, h := range heads {
		switch {
		case !due[h.Tenant]:
		case d.tenantHeld(h.Tenant):
			held[h.Tenant] = true // its chain is not the witnessed one: nothing to sign
		default:
			todo = append(todo, h)
		}
	}
	published = d.publishHeads(ctx, signer, todo, trusted, acc)
}

// takeDue moves the pending tenants due at now out of witnessPending and
// stamps them (rearmWitness undoes that for those not published).
func (d *Drainer) takeDue(now time.Time) map[uuid.UUID]bool {
	d.witnessMu.Lock()
	defer d.witnessMu.Unlock()
	if d.witnessedAt == nil {
		d.witnessedAt = map[uuid.UUID]time.Time{}
	}
	due := map[uuid.UUID]bool{}
	for t := range d.witnessPending {
		if now.Sub(d.witnessedAt[t]) >= d.opts.WitnessInterval {
			due[t] = true
			d.witnessedAt[t] = now
			delete(d.witnessPending, t)
		}
	}
	return due
}

// rearmWitness puts the due tenants whose head was not published back,
// due at once (a failed publication is retried by the next one, never
// counted as witnessed). A held tenant is looked at again an interval
// later, not by every publication.
func (d *Drainer) rearmWitness(due, published, held map[uuid.UUID]bool) {
	d.witnessMu.Lock()
	defer d.witnessMu.Unlock()
	for t := range due {
		if published[t] {
			continue
		}
		if !held[t] {
			delete(d.witnessedAt, t)
		}
		d.witnessPending[t] = struct{}{}
	}
}

// publishHeads signs, checks and publishes heads, as many at once as suit
// the store, and returns the tenants whose head it published.
func (d *Drainer) publishHeads(ctx context.Context, signer witness.Signer, heads []*witness.Head, trusted witness.KeyLookup, acc chainverify.Acceptances) map[uuid.UUID]bool {
	// The journal reads of the extends checks, one query for all the heads
	// past a witness this writer put (instead of one query each); a head
	// whose check asks anything else reads it itself.
	contains := func(t uuid.UUID) witness.Contains { return chainverify.JournalContains(d.db, t) }
	if jh, err := chainverify.ReadJournalHashes(ctx, d.db, d.witnessPub.WillAsk(heads)); err == nil {
		contains = jh.Contains
	} else {
		d.log.Warn("could not read the journal's hashes at the tenants' last witnesses at once; reading them one by one", "error", err)
	}
	var mu sync.Mutex
	published := map[uuid.UUID]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, store.Concurrency(d.opts.Lake))
	for _, h := range heads {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if d.publishHead(ctx, signer, h, witness.Check{Trusted: trusted, Contains: contains(h.Tenant), Excused: acc.Excuses}) {
				mu.Lock()
				published[h.Tenant] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return published
}

// publishHead publishes one head (and its C2SP checkpoint); false if it
// was not published. The Publisher (witness.Publisher) remembers the
// witness it put last for the tenant: the next publication lists the
// tenant's witnesses from there (another writer's newer witness is in that
// listing, and sends it down the full check), reads the journal once when
// the head moved, and puts nothing when it did not.
func (d *Drainer) publishHead(ctx context.Context, signer witness.Signer, h *witness.Head, c witness.Check) bool {
	out, cpErr, err := d.witnessPub.Publish(ctx, h, signer, c)
	if out == witness.Superseded {
		// Another publisher witnessed a later head the journal holds
		// after this one was read: nothing to put, nothing lost.
		d.log.Debug("a newer witness of the tenant is already published; this head is stale", "tenant", h.Tenant.String(), "seq", h.Seq)
	}
	if errors.Is(err, witness.ErrConflict) || errors.Is(err, witness.ErrNotExtending) {
		d.log.Error("the head does not extend the tenant's witnessed history: fork evidence; holding the tenant",
			"tenant", h.Tenant.String(), "seq", h.Seq, "error", err)
		d.holdForked(chainverify.Finding{Tenant: h.Tenant, Seq: h.Seq, Reason: chainverify.ReasonFork, Detail: err.Error()})
		return false
	}
	if err != nil {
		d.log.Warn("could not publish a witnessed head; will try again with a later publication", "tenant", h.Tenant.String(), "error", err)
		return false
	}
	d.opts.Metrics.witnessed() // put now, or unchanged since it was
	// The same head in the C2SP checkpoint form, for external witnesses
	// (best effort, like the JSON head).
	if cpErr != nil {
		d.log.Warn("could not publish the head's signed checkpoint", "tenant", h.Tenant.String(), "seq", h.Seq, "error", cpErr)
	}
	return true
}

// holdForked holds a tenant a publication found forked. The publication
// runs beside a batch: applyTable asks tenantHeld just before each commit,
// so none of the tenant's tables commits after this returns.
func (d *Drainer) holdForked(f chainverify.Finding) {
	d.heldMu.Lock()
	// A new map, not a write into the old one: catchUp reads the map it
	// took under heldMu after letting go of the lock.
	held := make(map[uuid.UUID]chainverify.Finding, len(d.held)+1)
	for t, g := range d.held {
		held[t] = g
	}
	held[f.Tenant] = f
	d.held = held
	if d.heldDuringCheck != nil {
		d.heldDuringCheck[f.Tenant] = f // the fork check beside the batches keeps it (forkrecheck.go)
	}
	d.heldMu.Unlock()
	d.stateChanged() // a batch read ahead was read under the old holds (prefetch.go)
}

// tenantHeld reports whether the tenant is held for a forked chain.
func (d *Drainer) tenantHeld(t uuid.UUID) bool {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	_, ok := d.held[t]
	return ok
}

// headsDurable waits (bounded) until the required standbys flushed the WAL
// position read now; if they do not, the due tenants are witnessed by a
// later publication instead (lag, never a witness ahead of a failover; the
// caller re-arms them).
func (d *Drainer) headsDurable(ctx context.Context) bool {
	if !d.opts.Durable.Waits() {
		return true
	}
	lsn, err := outbox.CoverLSN(ctx, d.db)
	var v replication.Verdict
	if err == nil {
		v, err = d.waitDurable(ctx, lsn, min(d.opts.DurableTimeout, witnessDurableWait))
	}
	if err == nil && v.Durable {
		return true
	}
	if err != nil {
		d.log.Warn("could not tell whether the standbys hold the chain heads; witnessing them with a later publication", "error", err)
	} else {
		d.log.Warn("not witnessing chain heads the standbys have not flushed; will try with a later publication (lag, not loss)", "reason", v.Reason)
	}
	return false
}

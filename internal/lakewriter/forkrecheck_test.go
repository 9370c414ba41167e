package lakewriter_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// recheckGate makes the long-running loop's fork checks beside the batches
// stop after their read until the test lets each go on: entered[i] is
// closed when check i has read, release[i] lets it end; checks past the
// gates go on at once. stop, closed at cleanup before the run is stopped,
// lets every check go on.
type recheckGate struct {
	entered, release []chan struct{}
	stop             chan struct{}
	n                atomic.Int32
}

func newRecheckGate(t *testing.T, d *lakewriter.Drainer, gates int) *recheckGate {
	g := &recheckGate{stop: make(chan struct{})}
	for range gates {
		g.entered = append(g.entered, make(chan struct{}))
		g.release = append(g.release, make(chan struct{}))
	}
	d.OnForkRecheck(func() {
		i := int(g.n.Add(1)) - 1
		if i >= len(g.entered) {
			return
		}
		close(g.entered[i])
		select {
		case <-g.release[i]:
		case <-g.stop:
		}
	})
	return g
}

func (g *recheckGate) waitEntered(t *testing.T, i int) {
	t.Helper()
	select {
	case <-g.entered[i]:
	case <-time.After(time.Minute):
		t.Fatalf("fork check %d beside the batches never ran", i+1)
	}
}

// runRechecking loads the bundle's tenants (seed) and runs, until the test
// ends, a long-running writer that witnesses every head and checks for
// forks every 20 ms, its first gates checks held at their gates (gate.stop
// is closed first at cleanup, so no check waits on its gate then).
func (b *bundle) runRechecking(t *testing.T, seed uint64, gates int) (*lakewriter.Drainer, store.Store, *recheckGate) {
	return b.runRecheckingWith(t, seed, gates, func(o *lakewriter.Options) { o.WitnessInterval = time.Nanosecond })
}

// runRecheckingWith is runRechecking with the options set by opt.
func (b *bundle) runRecheckingWith(t *testing.T, seed uint64, gates int, opt func(*lakewriter.Options)) (*lakewriter.Drainer, store.Store, *recheckGate) {
	b.load(t, workload.Config{Claims: 3, Seed: seed})
	lake := store.NewMem()
	o := b.opts(lake)
	o.ForkCheckInterval = 20 * time.Millisecond
	opt(&o)
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	g := newRecheckGate(t, d, gates)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		close(g.stop)
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("Run did not return")
		}
	})
	return d, lake, g
}

// TestRun_ForkCheckBesideTheBatches_BatchesCommitWhileItReads_ThenItsFindingHolds:
// the loop's periodic fork check is held after its read; meanwhile new
// rows are cut, committed and the frontier moves (on the batch path the
// check held every batch back for as long as it read: 10–28 s at 10,000
// tenants). Once it goes on, a later check finds a tenant whose tail was
// lost and holds it.
func TestRun_ForkCheckBesideTheBatches_BatchesCommitWhileItReads_ThenItsFindingHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim, other := b.tenants[0], b.tenants[1]
	d, lake, g := b.runRechecking(t, 111, 1)

	g.waitEntered(t, 0)
	b.load(t, workload.Config{Tenants: []uuid.UUID{other}, Claims: 2, Seed: 112})
	want := b.lastSeq(t)
	require.Eventually(t, func() bool { return d.Frontier() >= want }, time.Minute, 10*time.Millisecond,
		"batches commit while the fork check reads")
	close(g.release[0])

	var witnessed int64
	require.Eventually(t, func() bool {
		seqs := witnessedSeqs(t, lake)
		return seqs[victim.String()] != ""
	}, time.Minute, 10*time.Millisecond, "the victim's head is witnessed")
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, victim).Scan(&witnessed))
	loseTail(t, b.pool, victim, witnessed-2)
	require.Eventually(t, func() bool {
		r := d.Refused()
		return len(r) == 1 && r[0].Tenant == victim && r[0].Reason == chainverify.ReasonTailLost
	}, time.Minute, 10*time.Millisecond, "a later periodic check holds the tenant that lost its tail")
}

// TestRun_PublicationHoldsATenantWhileTheForkCheckReads_TheCheckKeepsTheHold:
// the periodic check has read (nothing wrong then); before the loop takes
// its result, a witness publication finds a witness the tenant's chain
// does not extend and holds the tenant. Taking the check's result must
// not release it: the check read before the evidence was there.
func TestRun_PublicationHoldsATenantWhileTheForkCheckReads_TheCheckKeepsTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim := b.tenants[0]
	d, lake, g := b.runRechecking(t, 113, 2)

	g.waitEntered(t, 0)
	require.Empty(t, d.Refused())
	otherWriterWitnessesAFork(t, b, lake, victim)
	d.PublishWitnessesNow(ctx, []uuid.UUID{victim})
	require.Len(t, d.Refused(), 1, "the publication held the tenant")

	close(g.release[0])
	g.waitEntered(t, 1) // the loop took the first check's result before it started the second (held at its gate)
	refused := d.Refused()
	require.Len(t, refused, 1, "the first check's result did not release the tenant the publication held")
	require.Equal(t, victim, refused[0].Tenant)
}

// TestRun_PeriodicForkCheck_TailLostThatOnlyBronzeHeld_IsHeldFromTheHeadTheWriterCommitted:
// no witness is published, so bronze is the only anchor. The periodic
// check takes the bronze anchor from what the writer committed, not from
// the lake (bronzeheads.go): after a check has seen the tenant's first
// bronze head, more of its events are drained, then a failover loses
// those (the journal is cut below bronze's newest event). A later
// periodic check must hold the tenant as tail-lost, from the head the
// writer's own commit left, not the one the earlier check read.
func TestRun_PeriodicForkCheck_TailLostThatOnlyBronzeHeld_IsHeldFromTheHeadTheWriterCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim := b.tenants[0]
	d, _, g := b.runRecheckingWith(t, 114, 0, func(o *lakewriter.Options) { o.WitnessInterval = -1 })
	checks := &g.n // every check passes its (absent) gate
	drained := func() {
		t.Helper()
		want := b.lastSeq(t)
		require.Eventually(t, func() bool { return d.Frontier() >= want }, time.Minute, 10*time.Millisecond)
	}
	drained()
	// A check that started after the drain has read the first bronze head.
	n := checks.Load()
	require.Eventually(t, func() bool { return checks.Load() >= n+2 }, time.Minute, 10*time.Millisecond)
	var first int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, victim).Scan(&first))

	b.load(t, workload.Config{Tenants: []uuid.UUID{victim}, Claims: 3, Seed: 115})
	drained()
	loseTail(t, b.pool, victim, first+1) // bronze holds more than first+1 now: the journal lost what only bronze saw
	require.Eventually(t, func() bool {
		r := d.Refused()
		return len(r) == 1 && r[0].Tenant == victim && r[0].Reason == chainverify.ReasonTailLost
	}, time.Minute, 10*time.Millisecond, "a periodic check holds the tenant whose lost tail only bronze held")
}

// TestRun_PeriodicForkCheck_TenantsWhoseBronzeTheWriterCommitted_ReadNoBronzeTable:
// the writer drained every tenant after its check at start; the periodic
// check then takes every bronze anchor from those commits and opens no
// bronze table in the lake (at 10,000 tenants those reads were most of
// its CPU), and it still finds nothing wrong.
func TestRun_PeriodicForkCheck_TenantsWhoseBronzeTheWriterCommitted_ReadNoBronzeTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, lake, d := drainedWitnessing(t, 116)

	before := len(lake.Trace())
	require.NoError(t, d.RecheckForksNow(ctx))
	for _, e := range lake.Trace()[before:] {
		require.NotContains(t, e.Key, "bronze", "the periodic check read a bronze table the writer committed: %s", e)
	}
	require.Empty(t, d.Refused())
}

// TestRun_PeriodicForkCheck_WitnessesTheWriterPut_AreNotReadBack_ANewerForeignOneIs:
// the periodic check takes the witnesses the writer put from its
// publisher's memory and reads none of them back (at 10,000 tenants
// reading and verifying them was most of the check's CPU); a newer
// witness another writer put, of a chain the journal does not hold, is
// read and holds its tenant.
func TestRun_PeriodicForkCheck_WitnessesTheWriterPut_AreNotReadBack_ANewerForeignOneIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, lake, d := drainedWitnessing(t, 117)
	seqs := witnessedSeqs(t, lake)
	for _, id := range b.tenants {
		require.NotEmpty(t, seqs[id.String()], "tenant %s is witnessed", id)
	}

	readWitnesses := func(from int) (n int) {
		for _, e := range lake.Trace()[from:] {
			if e.Op == store.OpGet && strings.HasPrefix(e.Key, witness.Prefix) {
				n++
			}
		}
		return n
	}
	before := len(lake.Trace())
	require.NoError(t, d.RecheckForksNow(ctx))
	require.Zero(t, readWitnesses(before), "the periodic check read back a witness the writer put")
	require.Empty(t, d.Refused())

	victim := b.tenants[1]
	otherWriterWitnessesAFork(t, b, lake, victim)
	before = len(lake.Trace())
	require.NoError(t, d.RecheckForksNow(ctx))
	require.Equal(t, 1, readWitnesses(before), "only the other writer's witness is read")
	refused := d.Refused()
	require.Len(t, refused, 1)
	require.Equal(t, victim, refused[0].Tenant)
}

// drainedWitnessing loads three tenants (seed) and drains them all with a
// writer that witnesses every head, into an in-memory lake that records
// its operations.
func drainedWitnessing(t *testing.T, seed uint64) (*bundle, *store.Mem, *lakewriter.Drainer) {
	t.Helper()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 3, Seed: seed})
	lake := store.NewMem()
	o := b.opts(lake)
	o.WitnessInterval = time.Nanosecond
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)
	return b, lake, d
}

// otherWriterWitnessesAFork puts, as another writer would, a witness of
// victim 100 events past its head on a chain the journal does not hold.
func otherWriterWitnessesAFork(t *testing.T, b *bundle, lake store.Store, victim uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	heads, err := witness.Capture(ctx, b.pool, &victim, time.Now())
	require.NoError(t, err)
	theirs := *heads[0]
	theirs.Seq, theirs.Hash = theirs.Seq+100, strings.Repeat("cd", 32)
	require.NoError(t, theirs.Sign(b.key))
	_, err = witness.Publish(ctx, lake, &theirs)
	require.NoError(t, err)
}

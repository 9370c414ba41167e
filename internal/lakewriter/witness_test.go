package lakewriter_test

import (
	"context"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// TestWitness_FailedPublication_IsRetriedByTheNextBatch: the store refuses
// the first witness put. The tenant is not counted as witnessed: the next
// batch publishes its head, although the witness interval (an hour) has
// not passed.
func TestWitness_FailedPublication_IsRetriedByTheNextBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tenant := b.tenants[0]
	b.load(t, workload.Config{Claims: 3, Seed: 91})
	lake := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent},
		Key: witness.Prefix + tenant.String() + "/*.json", Times: 1, Kind: store.FaultError})
	d, _ := b.witnessingDrainer(t, lake, time.Hour)
	b.drainAll(t, d)
	require.NotContains(t, witnessedSeqs(t, lake), tenant.String(), "the first put failed")

	b.load(t, workload.Config{Claims: 2, Seed: 92})
	b.drainAll(t, d)
	var head int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, tenant).Scan(&head))
	require.Equal(t, path.Base(witness.Key(tenant, head)), witnessedSeqs(t, lake)[tenant.String()],
		"the next batch published the head the failed publication left out")
}

// TestWitness_ForkFoundMidBatch_NoTableOfTheTenantCommitsAfterIt: a witness
// publication running beside a batch finds a tenant's head in conflict with
// its witness (planted here, at the head's seq, while the batch is between
// writing the tenant's first data file and committing it). From then on no
// table of that tenant commits: the batch leaves its rows out, the other
// tenant's rows go in and the frontier moves; the run reports the tenant.
func TestWitness_ForkFoundMidBatch_NoTableOfTheTenantCommitsAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim, other := b.tenants[0], b.tenants[1]
	b.load(t, workload.Config{Claims: 5, Seed: 93})
	lake := store.NewMem()
	d, o := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, d)
	// The newest batch leaves the victim out: the next writer's replay of
	// it publishes no witness of the victim beside the hook below.
	b.load(t, workload.Config{Tenants: []uuid.UUID{other}, Claims: 1, Seed: 95})
	b.drainAll(t, d)
	before := len(readBronze(t, lake, victim))

	b.load(t, workload.Config{Claims: 5, Seed: 94})
	o.Limits = lakewriterLimits(1_000_000) // one batch
	o.Parallel = 1                         // the tenant's tables one after the other
	var once sync.Once
	var d2 *lakewriter.Drainer
	o.Crash = func(p lakewriter.CrashPoint, key tables.TableKey) error {
		if p != lakewriter.AfterDataFiles || key.Tenant != victim {
			return nil
		}
		once.Do(func() {
			heads, err := witness.Capture(ctx, b.pool, &victim, time.Now())
			require.NoError(t, err)
			require.Len(t, heads, 1)
			forged := *heads[0]
			forged.Hash = strings.Repeat("ab", 32)
			require.NoError(t, forged.Sign(b.key))
			_, err = witness.Publish(ctx, lake, &forged)
			require.NoError(t, err)
			d2.PublishWitnessesNow(ctx, []uuid.UUID{victim}) // as a publication beside the batch would
		})
		return nil
	}
	var err error
	d2, err = lakewriter.New(o)
	require.NoError(t, err)
	sum, err := d2.DrainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Batches)
	require.Len(t, sum.Refused, 1)
	require.Equal(t, victim, sum.Refused[0].Tenant)
	require.Equal(t, chainverify.ReasonFork, sum.Refused[0].Reason)
	require.Equal(t, before, len(readBronze(t, lake, victim)), "no table of the tenant committed after the fork was found")
	require.Equal(t, b.lastSeq(t), d2.Frontier(), "the frontier moved on")
	var want int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, other).Scan(&want))
	require.Len(t, readBronze(t, lake, other), want, "the other tenant was drained")
}

// TestWitness_TailLostWhileAPublicationIsInFlight_TheForkCheckWaitsForItAndHolds:
// a publication beside the batches is signing a head the lake does not hold
// yet, and its put is slow; meanwhile a failover loses those events, so
// only that witness shows the loss (the lake's bronze agrees with the
// shortened journal). The fork check waits for the publication and holds
// the tenant, instead of reading the witnesses as they were before it.
func TestWitness_TailLostWhileAPublicationIsInFlight_TheForkCheckWaitsForItAndHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tenant := b.tenants[0]
	b.load(t, workload.Config{Claims: 3, Seed: 96})
	lake := store.NewFaulty(store.NewMem())
	d, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, d)
	var drained int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, tenant).Scan(&drained))

	b.load(t, workload.Config{Claims: 3, Seed: 97}) // the journal moves past the lake
	match, arrived := witnessPutOf(tenant)
	lake.SetRules(store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultDelay, Delay: 2 * time.Second, Times: 1,
		Match: match})
	d.PublishWitnessesBeside(ctx, []uuid.UUID{tenant})
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the publication never put the tenant's witness")
	}
	loseTail(t, b.pool, tenant, drained)

	require.NoError(t, d.CheckForksNow(ctx))
	refused := d.Refused()
	require.Len(t, refused, 1, "the check saw the witness the publication in flight was putting")
	require.Equal(t, tenant, refused[0].Tenant)
	require.Equal(t, chainverify.ReasonTailLost, refused[0].Reason)
}

// witnessingDrainer is a drainer of the bundle's options over lake that
// witnesses each tenant's head at most every interval; its options are
// returned for more drainers like it.
func (b *bundle) witnessingDrainer(t *testing.T, lake store.Store, interval time.Duration) (*lakewriter.Drainer, lakewriter.Options) {
	t.Helper()
	o := b.opts(lake)
	o.WitnessInterval = interval
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	return d, o
}

// TestWitness_StopWhileAPublicationHangs_RunReturnsAfterTheBoundedWait: the
// store never answers the witness put of a publication beside the batches.
// Stopping the long-running writer waits for it only a bounded while, then
// cancels it: Run returns, the lake is exact, and the next writer
// witnesses the head.
func TestWitness_StopWhileAPublicationHangs_RunReturnsAfterTheBoundedWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tenant := b.tenants[0]
	match, arrived := witnessPutOf(tenant)
	lake := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultTimeout,
		Match: match})
	d, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.load(t, workload.Config{Claims: 3, Seed: 98})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the writer never put the tenant's witness")
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return while a witness put hung")
	}
	b.verifyLake(t, lake)
	require.NotContains(t, witnessedSeqs(t, lake), tenant.String())

	lake.SetRules()
	next, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, next) // its replay of the newest batch touches the tenant
	require.Contains(t, witnessedSeqs(t, lake), tenant.String(), "the next writer witnessed the head")
}

// witnessPutOf matches the puts of tenant's witnessed heads (not their
// checkpoints); arrived is closed at the first.
func witnessPutOf(tenant uuid.UUID) (match func(store.OpKind, string) bool, arrived <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(_ store.OpKind, key string) bool {
		if !strings.HasPrefix(key, witness.Prefix+tenant.String()+"/") || !strings.HasSuffix(key, ".json") {
			return false
		}
		once.Do(func() { close(ch) })
		return true
	}, ch
}

// TestWitness_AnotherWriterWitnessedAForkBetweenTwoPublications_TheTenantIsHeld:
// the writer witnessed the tenant's head (and remembers that witness);
// then another writer (`oml chain witness` against a primary that has
// since failed over) witnessed seq head+1 of a chain the journal does not
// hold. The writer's next publication, of a head past both, must not take
// its own remembered witness as the newest: it reads the other one, finds
// the head does not extend it and holds the tenant, putting nothing.
func TestWitness_AnotherWriterWitnessedAForkBetweenTwoPublications_TheTenantIsHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tenant := b.tenants[0]
	d, lake, ours := b.drainWitnessed(t, 101)

	b.load(t, workload.Config{Claims: 3, Seed: 102}) // the journal moves on past ours
	heads, err := witness.Capture(ctx, b.pool, &tenant, time.Now())
	require.NoError(t, err)
	theirs := *heads[0]
	theirs.Seq, theirs.Hash = ours+1, strings.Repeat("cd", 32) // not the journal's event at ours+1
	require.NoError(t, theirs.Sign(b.key))
	_, err = witness.Publish(ctx, lake, &theirs)
	require.NoError(t, err)

	d.PublishWitnessesNow(ctx, []uuid.UUID{tenant})
	refused := d.Refused()
	require.Len(t, refused, 1, "the other writer's witness was checked")
	require.Equal(t, tenant, refused[0].Tenant)
	require.Equal(t, chainverify.ReasonFork, refused[0].Reason)
	require.Equal(t, path.Base(witness.Key(tenant, ours+1)), witnessedSeqs(t, lake)[tenant.String()], "no head was put past theirs")
}

// TestWitness_UnchangedHeads_AreListedNotPutAgain: a publication of heads
// the writer witnessed already (tenants touched again with no new event)
// lists each tenant's witnesses once, to see another writer's, and puts
// and reads nothing.
func TestWitness_UnchangedHeads_AreListedNotPutAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 3, Seed: 103})
	lake := store.NewFaulty(store.NewMem())
	d, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, d)
	before := witnessedSeqs(t, lake)
	for _, tenant := range b.tenants {
		require.Contains(t, before, tenant.String())
	}

	lake.Reset()
	d.PublishWitnessesNow(ctx, b.tenants)
	require.Empty(t, d.Refused())
	require.Equal(t, len(b.tenants), lake.Count(store.OpList))
	require.Zero(t, lake.Count(store.OpPutIfAbsent))
	require.Zero(t, lake.Count(store.OpGet))
	require.Equal(t, before, witnessedSeqs(t, lake))
}

// TestWitness_ChainRewrittenAtOurWitness_FoundByTheBatchedJournalRead: the
// writer witnessed the tenant at seq s; the tenant wrote on past s, and
// then the journal came to hold another event at s (a rewritten chain,
// planted here as another hash at s). The next publication reads the
// journal at every remembered witness in one query; that read finds the
// other event and the tenant is held, nothing put.
func TestWitness_ChainRewrittenAtOurWitness_FoundByTheBatchedJournalRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim := b.tenants[0]
	d, lake, ours := b.drainWitnessed(t, 104)

	b.load(t, workload.Config{Claims: 3, Seed: 105})
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER journal_append_only_row`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE oml.journal SET hash = sha256(hash) WHERE tenant_id = $1 AND seq = $2`, victim, ours)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `ALTER TABLE oml.journal ENABLE TRIGGER journal_append_only_row`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	d.PublishWitnessesNow(ctx, b.tenants)
	refused := d.Refused()
	require.Len(t, refused, 1)
	require.Equal(t, victim, refused[0].Tenant)
	require.Equal(t, chainverify.ReasonFork, refused[0].Reason)
	require.Contains(t, refused[0].Detail, "holds another event there")
	require.Equal(t, path.Base(witness.Key(victim, ours)), witnessedSeqs(t, lake)[victim.String()], "nothing put past ours")
	require.Equal(t, path.Base(witness.Key(b.tenants[1], b.headSeq(t, b.tenants[1]))), witnessedSeqs(t, lake)[b.tenants[1].String()], "the other tenant's head was witnessed")
}

// drainWitnessed loads claims (seed) for every tenant and drains them into
// a new lake with a writer that witnesses every batch; it returns the
// writer, the lake and the first tenant's head, which the writer witnessed.
func (b *bundle) drainWitnessed(t *testing.T, seed uint64) (*lakewriter.Drainer, store.Store, int64) {
	t.Helper()
	b.load(t, workload.Config{Claims: 3, Seed: seed})
	lake := store.NewMem()
	d, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, d)
	head := b.headSeq(t, b.tenants[0])
	require.Equal(t, path.Base(witness.Key(b.tenants[0], head)), witnessedSeqs(t, lake)[b.tenants[0].String()])
	return d, lake, head
}

// headSeq is tenant's chain head in oml.chain_heads.
func (b *bundle) headSeq(t *testing.T, tenant uuid.UUID) int64 {
	t.Helper()
	var seq int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, tenant).Scan(&seq))
	return seq
}

// TestWitness_PublicationOfOneTenant_ReadsOnlyItsHead: a publication reads
// the heads of the tenants due, not every chain head of the deployment (at
// 20,000 tenants that was about 5 MB held beside the batches for each
// publication), and publishes the due tenant's head.
func TestWitness_PublicationOfOneTenant_ReadsOnlyItsHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 4)
	b.load(t, workload.Config{Claims: 2, Seed: 107})
	lake := store.NewFaulty(store.NewMem())
	d, _ := b.witnessingDrainer(t, lake, time.Nanosecond)
	b.drainAll(t, d)

	b.load(t, workload.Config{Claims: 1, Seed: 108})
	var mu sync.Mutex
	var due, heads []int
	d.OnWitnessCapture(func(n, h int) {
		mu.Lock()
		due, heads = append(due, n), append(heads, h)
		mu.Unlock()
	})
	lake.Reset()
	d.PublishWitnessesNow(ctx, b.tenants[:1])
	mu.Lock()
	require.Equal(t, []int{1}, due)
	require.Equal(t, []int{1}, heads, "the publication read the heads of tenants it does not publish")
	mu.Unlock()
	require.Equal(t, 1, lake.Count(store.OpPutIfAbsent)/2, "one head put, as JSON and as a checkpoint")
}

package witness_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// journal is a tenant's chain for the Publisher's tests: its hash at each
// seq, as chainHash gives, except where forked says otherwise (a chain
// that holds another event there and, a hash chain, everything after).
type journal struct {
	tenant uuid.UUID
	forkAt int64 // 0: not forked
	end    int64 // the last seq it holds (0: no end; a head of ours is read at its end)
	reads  int
}

func (j *journal) hash(seq int64) []byte {
	h := chainHash(j.tenant, seq)
	if j.forkAt > 0 && seq >= j.forkAt {
		h[0] ^= 0xff
	}
	return h
}

// holds reports whether the journal holds hash at seq now.
func (j *journal) holds(seq int64, hash []byte) bool {
	return (j.end == 0 || seq <= j.end) && string(j.hash(seq)) == string(hash)
}

func (j *journal) head(seq int64) *witness.Head {
	h := benchHead(j.tenant, seq)
	h.Hash = hexOf(j.hash(seq))
	return h
}

func (j *journal) check(k *keys.Key) witness.Check {
	return witness.Check{Trusted: trust(k), Contains: func(_ context.Context, seq int64, hash []byte) (bool, error) {
		j.reads++
		return j.holds(seq, hash), nil
	}}
}

// publisherFixture is a Publisher over a recording store that has put the
// witness of j's head at seq 5.
func publisherFixture(t *testing.T) (*witness.Publisher, *store.Faulty, *journal, *keys.Key) {
	t.Helper()
	st := store.NewFaulty(store.NewMem())
	k := newKey(t)
	j := &journal{tenant: uuid.New()}
	p := witness.NewPublisher(st)
	out, cpErr, err := p.Publish(context.Background(), j.head(5), k, j.check(k))
	require.NoError(t, err)
	require.NoError(t, cpErr)
	require.Equal(t, witness.Put, out)
	st.Reset()
	j.reads = 0
	return p, st, j, k
}

// TestPublisher_NextHead_OneListingOneJournalReadTwoPuts: the tenant's next
// head costs one listing, one journal read and the two puts: the witness
// put before is neither read back nor verified again.
func TestPublisher_NextHead_OneListingOneJournalReadTwoPuts(t *testing.T) {
	t.Parallel()
	p, st, j, k := publisherFixture(t)
	out, _, err := p.Publish(context.Background(), j.head(9), k, j.check(k))
	require.NoError(t, err)
	require.Equal(t, witness.Put, out)
	require.Equal(t, 1, st.Count(store.OpList))
	require.Equal(t, 0, st.Count(store.OpGet))
	require.Equal(t, 2, st.Count(store.OpPutIfAbsent))
	require.Equal(t, 1, j.reads)
	seq, ok := p.RememberedSeq(j.tenant)
	require.True(t, ok)
	require.EqualValues(t, 9, seq)
}

// TestPublisher_UnchangedHead_ListsAndPutsNothing: the same head again (a
// tenant touched by a batch with no new event) is one listing; nothing is
// signed, put or read.
func TestPublisher_UnchangedHead_ListsAndPutsNothing(t *testing.T) {
	t.Parallel()
	p, st, j, k := publisherFixture(t)
	out, _, err := p.Publish(context.Background(), j.head(5), k, j.check(k))
	require.NoError(t, err)
	require.Equal(t, witness.Unchanged, out)
	require.Equal(t, []store.TraceEntry{{Op: store.OpList, Key: witness.Prefix + j.tenant.String() + "/", Outcome: "ok"}}, st.Trace())
	require.Zero(t, j.reads)
}

// TestPublisher_AnotherWriterWitnessedAForkBetweenOurs_IsStillRefused:
// between two publications of ours, another writer (`oml chain witness`)
// witnessed seq 7 of a chain that the journal no longer holds (forked at
// 6, after our witness at 5). Our next head's chain holds our witness, but
// not theirs: the listing shows theirs, and the head is refused as not
// extending it, as without the memory.
func TestPublisher_AnotherWriterWitnessedAForkBetweenOurs_IsStillRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	otherWriterPublishes(t, st, k, j.head(7))
	j.forkAt = 6
	_, _, err := p.Publish(ctx, j.head(9), k, j.check(k))
	require.ErrorIs(t, err, witness.ErrNotExtending)
	require.Contains(t, err.Error(), "seq 7")
	_, ok := p.RememberedSeq(j.tenant)
	require.False(t, ok, "a refused tenant's memory is dropped")
}

// TestPublisher_AnotherWriterWitnessedANewerHead_AnUnchangedHeadIsRefused:
// another writer witnessed seq 8 after ours at 5; our head is still 5 (the
// journal lost 6–8, or our read of the heads is older). Without the
// listing an unchanged head would put nothing and say nothing; it is
// refused, as a head below a witness always was.
func TestPublisher_AnotherWriterWitnessedANewerHead_AnUnchangedHeadIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	otherWriterPublishes(t, st, k, j.head(8))
	j.end = 5 // 6–8 lost
	_, _, err := p.Publish(ctx, j.head(5), k, j.check(k))
	require.ErrorIs(t, err, witness.ErrNotExtending)
	require.Contains(t, err.Error(), "committed events were lost")
}

// TestPublisher_AnotherWriterWitnessedANewerHeadAfterOurRead_StaleHeadIsSupersededNotAFork:
// our head at 7 was read, then another writer (`oml chain witness`)
// witnessed seq 9, which the journal holds: nothing was lost, our head is
// only older than theirs. It is not fork evidence (before, the tenant was
// held as if committed events were lost), and nothing is put.
func TestPublisher_AnotherWriterWitnessedANewerHeadAfterOurRead_StaleHeadIsSupersededNotAFork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	stale := j.head(7)
	otherWriterPublishes(t, st, k, j.head(9))
	st.Reset()
	out, cpErr, err := p.Publish(ctx, stale, k, j.check(k))
	require.NoError(t, err)
	require.NoError(t, cpErr)
	require.Equal(t, witness.Superseded, out)
	require.Zero(t, st.Count(store.OpPutIfAbsent))
	// The same with the journal ending at 7 after all: 8–9 lost, refused.
	j.end = 7
	_, _, err = p.Publish(ctx, stale, k, j.check(k))
	require.ErrorIs(t, err, witness.ErrNotExtending)
	require.Contains(t, err.Error(), "committed events were lost")
}

// TestPublisher_HeadBelowOurWitness_TailLost_IsRefused: after our witness
// at 5, a head at 3 (the journal lost its tail; its chain still holds 1–3
// as witnessed) is refused.
func TestPublisher_HeadBelowOurWitness_TailLost_IsRefused(t *testing.T) {
	t.Parallel()
	requireNotExtending(t, 3, 0, "committed events were lost")
}

// TestPublisher_ChainRewrittenBelowOurWitness_IsRefused: after our witness
// at 5, a head at 9 whose chain holds another event at 4 (and so at 5: a
// rolled-back chain written again after a failover) is refused.
func TestPublisher_ChainRewrittenBelowOurWitness_IsRefused(t *testing.T) {
	t.Parallel()
	requireNotExtending(t, 9, 4, "holds another event there")
}

// requireNotExtending publishes the head at seq of the fixture's chain,
// forked at forkAt (0: not), and requires ErrNotExtending saying why.
func requireNotExtending(t *testing.T, seq, forkAt int64, why string) {
	t.Helper()
	p, _, j, k := publisherFixture(t)
	j.forkAt = forkAt
	j.end = seq // the head is the journal's end
	_, _, err := p.Publish(context.Background(), j.head(seq), k, j.check(k))
	require.ErrorIs(t, err, witness.ErrNotExtending)
	require.Contains(t, err.Error(), why)
}

// TestPublisher_OtherHashAtOurSeq_IsRefused: a head at our witness's seq 5
// with another hash is fork evidence, not "unchanged".
func TestPublisher_OtherHashAtOurSeq_IsRefused(t *testing.T) {
	t.Parallel()
	p, st, j, k := publisherFixture(t)
	j.forkAt = 5
	_, _, err := p.Publish(context.Background(), j.head(5), k, j.check(k))
	require.True(t, errorsIsFork(err), "%v", err)
	w, err := witness.Read(context.Background(), st, witness.Key(j.tenant, 5))
	require.NoError(t, err)
	require.Equal(t, hexOf(chainHash(j.tenant, 5)), w.Hash, "our witness stays")
}

// TestPublisher_AForkAcceptanceExcusesOurWitness: the chain no longer holds
// our witness, but a fork acceptance excuses it: the head is published,
// as without the memory.
func TestPublisher_AForkAcceptanceExcusesOurWitness(t *testing.T) {
	t.Parallel()
	p, _, j, k := publisherFixture(t)
	j.forkAt = 2
	c := j.check(k)
	c.Excused = func(w *witness.Head) bool { return w.Seq == 5 }
	out, _, err := p.Publish(context.Background(), j.head(9), k, c)
	require.NoError(t, err)
	require.Equal(t, witness.Put, out)
}

// TestPublisher_OurWitnessDeletedOrRewritten_TheFullPathPutsItAgain: a
// witness of ours that is gone from the store (or no longer the object we
// put) is not taken on trust from memory for an unchanged head: the full
// path runs and puts the head again (or reads what is there).
func TestPublisher_OurWitnessDeletedOrRewritten_TheFullPathPutsItAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	require.NoError(t, st.Delete(ctx, witness.Key(j.tenant, 5)))
	out, _, err := p.Publish(ctx, j.head(5), k, j.check(k))
	require.NoError(t, err)
	require.Equal(t, witness.Put, out)
	_, err = st.Get(ctx, witness.Key(j.tenant, 5))
	require.NoError(t, err, "put again")

	require.NoError(t, st.Delete(ctx, witness.Key(j.tenant, 5)))
	require.NoError(t, st.PutIfAbsent(ctx, witness.Key(j.tenant, 5), []byte("{}")))
	_, _, err = p.Publish(ctx, j.head(5), k, j.check(k))
	require.Error(t, err, "the garbage at our key is read, not trusted from memory")
}

func errorsIsFork(err error) bool {
	return errors.Is(err, witness.ErrNotExtending) || errors.Is(err, witness.ErrConflict)
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// TestPublisher_UnchangedHead_ACheckpointWhosePutFailedIsPutAgain: the
// checkpoint is best effort; when its put failed, the same head again puts
// the checkpoint (only).
func TestPublisher_UnchangedHead_ACheckpointWhosePutFailedIsPutAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := newKey(t)
	j := &journal{tenant: uuid.New()}
	st := store.NewFaulty(store.NewMem(), store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent},
		Key: witness.CheckpointKey(j.tenant, 5), Times: 1, Kind: store.FaultError})
	p := witness.NewPublisher(st)
	_, cpErr, err := p.Publish(ctx, j.head(5), k, j.check(k))
	require.NoError(t, err)
	require.Error(t, cpErr)

	st.Reset()
	out, cpErr, err := p.Publish(ctx, j.head(5), k, j.check(k))
	require.NoError(t, err)
	require.NoError(t, cpErr)
	require.Equal(t, witness.Unchanged, out)
	require.Equal(t, 1, st.Count(store.OpPutIfAbsent))
	_, err = st.Get(ctx, witness.CheckpointKey(j.tenant, 5))
	require.NoError(t, err)
}

// otherWriterPublishes puts h signed by k into st, as `oml chain witness`
// does, behind the Publisher's back.
func otherWriterPublishes(t *testing.T, st store.Store, k *keys.Key, h *witness.Head) {
	t.Helper()
	require.NoError(t, h.Sign(k))
	_, err := witness.Publish(context.Background(), st, h)
	require.NoError(t, err)
}

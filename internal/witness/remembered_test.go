package witness_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

// sameHead compares what the fork check uses of two heads.
func sameHead(t *testing.T, want, got *witness.Head) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.Tenant, got.Tenant)
	require.Equal(t, want.Seq, got.Seq)
	require.Equal(t, want.Hash, got.Hash)
	require.True(t, want.Time.Equal(got.Time), "time %s, want %s", got.Time, want.Time)
	require.Equal(t, want.SystemIdentifier, got.SystemIdentifier)
	require.Equal(t, want.Timeline, got.Timeline)
	require.Equal(t, want.KeyID, got.KeyID)
}

// TestNewestRemembered_OwnNewestWitnesses_AreNotReadBack_AndAnswerAsNewest:
// the witnesses the publisher put last are served from its memory (no
// read), another writer's are read, and every head is the one Newest
// reads from the store.
func TestNewestRemembered_OwnNewestWitnesses_AreNotReadBack_AndAnswerAsNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	second := &journal{tenant: uuid.New()}
	_, _, err := p.Publish(ctx, second.head(3), k, second.check(k))
	require.NoError(t, err)
	foreign := &journal{tenant: uuid.New()}
	otherWriterPublishes(t, st, k, foreign.head(4))

	read, bad, err := witness.Newest(ctx, st, nil, trust(k))
	require.NoError(t, err)
	require.Empty(t, bad)
	st.Reset()
	got, bad, err := witness.NewestRemembered(ctx, st, trust(k), p)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, got, 3)
	for _, id := range []uuid.UUID{j.tenant, second.tenant, foreign.tenant} {
		sameHead(t, read[id], got[id])
	}
	require.Equal(t, 1, st.Count(store.OpGet), "only the other writer's witness is read")
}

// TestNewestRemembered_AnotherWritersNewerWitness_IsRead: a witness put
// after ours (by `oml chain witness`, another lease) is the newest, and
// it is read, not answered with ours.
func TestNewestRemembered_AnotherWritersNewerWitness_IsRead(t *testing.T) {
	t.Parallel()
	p, st, j, k := publisherFixture(t)
	otherWriterPublishes(t, st, k, j.head(7))
	got, bad := newestRememberedReadingOne(t, st, trust(k), p, j.tenant)
	require.Empty(t, bad)
	require.EqualValues(t, 7, got.Seq)
}

// TestNewestRemembered_OwnWitnessRewrittenToAnotherSize_IsReadAndDistrusted:
// an object at our witness's key that is not the size we put is read like
// any other; garbage there is an untrusted witness, as Newest says.
func TestNewestRemembered_OwnWitnessRewrittenToAnotherSize_IsReadAndDistrusted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, st, j, k := publisherFixture(t)
	garbage := []byte(`{"not":"a witness"}`)
	require.NoError(t, st.Put(ctx, witness.Key(j.tenant, 5), bytes.NewReader(garbage), int64(len(garbage))))
	got, bad := newestRememberedReadingOne(t, st, trust(k), p, j.tenant)
	require.Nil(t, got)
	require.Len(t, bad, 1)
}

// TestNewestRemembered_KeyNoLongerTrusted_IsReadAndDistrusted: once the
// provider chain no longer issues the key we signed with for the tenant,
// our own witness is read and refused like anyone's.
func TestNewestRemembered_KeyNoLongerTrusted_IsReadAndDistrusted(t *testing.T) {
	t.Parallel()
	p, st, j, _ := publisherFixture(t)
	other := newKey(t)
	got, bad := newestRememberedReadingOne(t, st, trust(other), p, j.tenant)
	require.Nil(t, got)
	require.Len(t, bad, 1)
}

// plainSigner signs with a key but does not say which public key it is
// (not a NoteSigner).
type plainSigner struct{ k *keys.Key }

func (s plainSigner) KeyID() string          { return s.k.KeyID() }
func (s plainSigner) Sign(msg []byte) []byte { return s.k.Sign(msg) }

// TestNewestRemembered_SignerWithoutItsPublicKey_IsRead: a witness signed
// by a signer that did not give its public key is read and verified:
// the memory can only vouch for a key it knows.
func TestNewestRemembered_SignerWithoutItsPublicKey_IsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewFaulty(store.NewMem())
	k := newKey(t)
	j := &journal{tenant: uuid.New()}
	p := witness.NewPublisher(st)
	_, _, err := p.Publish(ctx, j.head(5), plainSigner{k}, j.check(k))
	require.NoError(t, err)
	got, bad := newestRememberedReadingOne(t, st, trust(k), p, j.tenant)
	require.Empty(t, bad)
	require.EqualValues(t, 5, got.Seq)
}

// newestRememberedReadingOne is NewestRemembered over st (its counts reset
// first), which must read exactly one witness: the tenant's answer (nil
// when it is not trusted) and the witnesses found untrusted.
func newestRememberedReadingOne(t *testing.T, st *store.Faulty, trusted witness.KeyLookup, p *witness.Publisher, tenant uuid.UUID) (*witness.Head, []error) {
	t.Helper()
	st.Reset()
	got, bad, err := witness.NewestRemembered(context.Background(), st, trusted, p)
	require.NoError(t, err)
	require.Equal(t, 1, st.Count(store.OpGet), "one witness is read")
	return got[tenant], bad
}

package witness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/witness"
)

func TestMain(m *testing.M) {
	testdb.Main(m, testdb.WithTemplate(schema.Migrate))
}

func head(t *testing.T, k *keys.Key, tenant uuid.UUID, seq int64, hashByte byte) *witness.Head {
	t.Helper()
	hash := make([]byte, 32)
	hash[0] = hashByte
	h := &witness.Head{Tenant: tenant, Seq: seq, Hash: hex.EncodeToString(hash),
		Time: time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), SystemIdentifier: "7312", Timeline: "00000001"}
	require.NoError(t, h.Sign(k))
	return h
}

// newKey is a fresh deployment key.
func newKey(t *testing.T) *keys.Key {
	t.Helper()
	k, err := keys.Generate()
	require.NoError(t, err)
	return k
}

func trust(k *keys.Key) witness.KeyLookup {
	return func(id string, _ uuid.UUID, _ int64) (ed25519.PublicKey, bool) {
		if id == k.KeyID() {
			return k.Public(), true
		}
		return nil, false
	}
}

func TestPublishAndNewest_OnAFileStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	k := newKey(t)
	a, b := uuid.New(), uuid.New()

	for _, h := range []*witness.Head{head(t, k, a, 5, 1), head(t, k, a, 12, 2), head(t, k, a, 9, 3), head(t, k, b, 3, 4)} {
		created, err := witness.Publish(ctx, st, h)
		require.NoError(t, err)
		require.True(t, created)
	}
	// The same head again: kept, not rewritten.
	created, err := witness.Publish(ctx, st, head(t, k, a, 12, 2))
	require.NoError(t, err)
	require.False(t, created)
	// Another hash at a witnessed seq: fork evidence, and the witness stays.
	_, err = witness.Publish(ctx, st, head(t, k, a, 12, 9))
	require.ErrorIs(t, err, witness.ErrConflict)

	newest, bad, err := witness.Newest(ctx, st, nil, trust(k))
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, newest, 2)
	require.EqualValues(t, 12, newest[a].Seq)
	require.Equal(t, head(t, k, a, 12, 2).Hash, newest[a].Hash)
	require.EqualValues(t, 3, newest[b].Seq)

	only, _, err := witness.Newest(ctx, st, &b, trust(k))
	require.NoError(t, err)
	require.Len(t, only, 1)
}

func TestNewest_RefusesWitnessesItCannotTrust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	k := newKey(t)
	other := newKey(t)
	a, b := uuid.New(), uuid.New()

	_, err := witness.Publish(ctx, st, head(t, other, a, 4, 1)) // a key nobody issued
	require.NoError(t, err)
	forged := head(t, k, b, 7, 1)
	forged.Seq = 8 // edited after signing
	_, err = witness.Publish(ctx, st, forged)
	require.NoError(t, err)

	newest, bad, err := witness.Newest(ctx, st, nil, trust(k))
	require.NoError(t, err)
	require.Empty(t, newest)
	require.Len(t, bad, 2)
}

func TestHeadMessage_CoversEveryField(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	base := head(t, k, uuid.New(), 10, 1)
	require.NoError(t, base.Verify(k.Public()))
	for name, edit := range map[string]func(h *witness.Head){
		"tenant":   func(h *witness.Head) { h.Tenant = uuid.New() },
		"seq":      func(h *witness.Head) { h.Seq++ },
		"hash":     func(h *witness.Head) { h.Hash = hex.EncodeToString(make([]byte, 32)) },
		"time":     func(h *witness.Head) { h.Time = h.Time.Add(time.Microsecond) },
		"system":   func(h *witness.Head) { h.SystemIdentifier = "9999" },
		"timeline": func(h *witness.Head) { h.Timeline = "00000002" },
		"key_id":   func(h *witness.Head) { h.KeyID = "00" },
	} {
		h := *base
		edit(&h)
		require.Error(t, h.Verify(k.Public()), name)
	}
}

func TestCapture_ReadsHeadsWithTheDatabaseIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	id := uuid.New()
	hash := make([]byte, 32)
	hash[31] = 7
	_, err := pool.Exec(ctx, `INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at) VALUES ($1, 42, $2, now())`, id, hash)
	require.NoError(t, err)
	now := time.Now()
	heads, err := witness.Capture(ctx, pool, nil, now)
	require.NoError(t, err)
	require.Len(t, heads, 1)
	require.Equal(t, id, heads[0].Tenant)
	require.EqualValues(t, 42, heads[0].Seq)
	require.Equal(t, hex.EncodeToString(hash), heads[0].Hash)
	require.NotEmpty(t, heads[0].SystemIdentifier)
	require.Len(t, heads[0].Timeline, 8)
}

// TestCheckExtends_RefusesAHeadThatDoesNotExtendAnEarlierWitness: a head
// below an earlier witness (a lost tail) or whose chain holds another hash
// at an earlier witness's seq (a fork) is refused, even when its own seq
// was never witnessed; a head that extends the newest witness passes, and
// an excused (accepted) loss is skipped.
func TestCheckExtends_RefusesAHeadThatDoesNotExtendAnEarlierWitness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	k := newKey(t)
	a := uuid.New()
	for _, h := range []*witness.Head{head(t, k, a, 5, 1), head(t, k, a, 12, 2)} {
		_, err := witness.Publish(ctx, st, h)
		require.NoError(t, err)
	}
	// The chain as the journal holds it: seq -> first hash byte.
	chain := map[int64]byte{5: 1, 12: 2}
	contains := func(_ context.Context, seq int64, hash []byte) (bool, error) {
		b, ok := chain[seq]
		return ok && hash[0] == b, nil
	}
	// Extends the newest witness: ok.
	require.NoError(t, witness.CheckExtends(ctx, st, head(t, k, a, 20, 7), trust(k), contains, nil))
	// Below the newest witness (the journal lost seq 12): refused.
	delete(chain, 12)
	err := witness.CheckExtends(ctx, st, head(t, k, a, 11, 7), trust(k), contains, nil)
	require.ErrorIs(t, err, witness.ErrNotExtending)
	require.ErrorContains(t, err, "seq 12")
	// Past it, on another chain (a fork written over the lost tail): refused.
	chain[12] = 9
	err = witness.CheckExtends(ctx, st, head(t, k, a, 30, 7), trust(k), contains, nil)
	require.ErrorIs(t, err, witness.ErrNotExtending)
	// The loss of seq 12 accepted: the walk goes on to seq 5, which the
	// chain holds.
	excused := func(w *witness.Head) bool { return w.Seq == 12 }
	require.NoError(t, witness.CheckExtends(ctx, st, head(t, k, a, 30, 7), trust(k), contains, excused))
	// A forged witness (another key) never blocks a publish.
	other := newKey(t)
	_, err = witness.Publish(ctx, st, head(t, other, a, 40, 3))
	require.NoError(t, err)
	require.NoError(t, witness.CheckExtends(ctx, st, head(t, k, a, 30, 7), trust(k), contains, excused))
}

// TestCheckExtends_HeadReadBeforeANewerWitnessTheJournalHolds_IsSupersededNotLost:
// a head at 8 read before another publisher witnessed seq 12, which the
// journal holds: ErrSuperseded, not ErrNotExtending (no event was lost).
func TestCheckExtends_HeadReadBeforeANewerWitnessTheJournalHolds_IsSupersededNotLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	k := newKey(t)
	a := uuid.New()
	_, err := witness.Publish(ctx, st, head(t, k, a, 12, 2))
	require.NoError(t, err)
	chain := map[int64]byte{8: 7, 12: 2}
	contains := func(_ context.Context, seq int64, hash []byte) (bool, error) {
		b, ok := chain[seq]
		return ok && hash[0] == b, nil
	}
	err = witness.CheckExtends(ctx, st, head(t, k, a, 8, 7), trust(k), contains, nil)
	require.ErrorIs(t, err, witness.ErrSuperseded)
	require.NotErrorIs(t, err, witness.ErrNotExtending)
	// The journal holds another event at 12 (a fork over a lost tail):
	// still refused as not extending.
	chain[12] = 9
	err = witness.CheckExtends(ctx, st, head(t, k, a, 8, 7), trust(k), contains, nil)
	require.ErrorIs(t, err, witness.ErrNotExtending)
}

func TestNewest_InvalidNewerWitnessesDoNotHideAnOlderValidOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	k := newKey(t)
	other := newKey(t)
	a := uuid.New()
	for _, h := range []*witness.Head{head(t, k, a, 5, 1), head(t, k, a, 9, 2), head(t, other, a, 12, 3)} {
		_, err := witness.Publish(ctx, st, h)
		require.NoError(t, err)
	}
	require.NoError(t, st.PutIfAbsent(ctx, witness.Key(a, 20), []byte("{garbage")))
	moved := head(t, k, a, 3, 4) // a valid head stored under another seq's key
	data, err := json.Marshal(moved)
	require.NoError(t, err)
	require.NoError(t, st.PutIfAbsent(ctx, witness.Key(a, 15), data))

	newest, bad, err := witness.Newest(ctx, st, nil, trust(k))
	require.NoError(t, err)
	require.EqualValues(t, 9, newest[a].Seq, "the newest valid witness is seq 9")
	require.Len(t, bad, 3)
	var seqs []int64
	for _, e := range bad {
		var inv *witness.InvalidError
		require.ErrorAs(t, e, &inv)
		require.Equal(t, a, inv.Tenant)
		seqs = append(seqs, inv.Seq)
	}
	require.Equal(t, []int64{12, 15, 20}, seqs)
}

// TestVerify_ARememberedSignatureVouchesOnlyForItsOwnBytes: Verify
// remembers verified signatures for the life of the process; a head already
// verified must still fail with any other signature byte, under another
// public key, or with any field changed (TestHeadMessage_CoversEveryField),
// and a bad signature is never remembered as good.
func TestVerify_ARememberedSignatureVouchesOnlyForItsOwnBytes(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	other := newKey(t)
	h := head(t, k, uuid.New(), 7, 3)
	for range 2 { // the second is served from memory
		require.NoError(t, h.Verify(k.Public()))
	}
	require.Error(t, h.Verify(other.Public()), "another public key")

	sig, err := base64.StdEncoding.DecodeString(h.Signature)
	require.NoError(t, err)
	for i := range sig {
		bad := *h
		flipped := append([]byte(nil), sig...)
		flipped[i] ^= 0x01
		bad.Signature = base64.StdEncoding.EncodeToString(flipped)
		for range 2 {
			require.Error(t, bad.Verify(k.Public()), "signature byte %d flipped", i)
		}
	}
	resigned := *h
	require.NoError(t, resigned.Sign(other))
	require.Error(t, resigned.Verify(k.Public()), "signed by another key")
	require.NoError(t, resigned.Verify(other.Public()))
	require.NoError(t, h.Verify(k.Public()), "the first head still verifies")
}

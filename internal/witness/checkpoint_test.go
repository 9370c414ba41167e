package witness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/note"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

func checkpointHead(t *testing.T, seq int64, hashByte string) *witness.Head {
	t.Helper()
	return &witness.Head{Version: 1, Tenant: uuid.MustParse("0b9f3c1e-7d2a-4c55-9a8e-1f2b3c4d5e6f"), Seq: seq,
		Hash: strings.Repeat(hashByte, 32), Time: time.Unix(1_764_576_000, 0).UTC(), SystemIdentifier: "7311", Timeline: "00000001"}
}

// TestCheckpoint_IsASignedNoteAnIndependentVerifierAccepts: the checkpoint
// form of a head is a C2SP signed note that golang.org/x/mod/sumdb/note (an
// independent implementation) opens with the verifier key oml prints, and
// its body is origin, tree size (the seq) and root hash (the head hash).
func TestCheckpoint_IsASignedNoteAnIndependentVerifierAccepts(t *testing.T) {
	t.Parallel()
	k, err := keys.Generate()
	require.NoError(t, err)
	h := checkpointHead(t, 42, "ab")
	msg, err := witness.SignCheckpoint(h, k)
	require.NoError(t, err)

	v, err := note.NewVerifier(witness.VerifierKey(k.KeyID(), k.Public()))
	require.NoError(t, err)
	n, err := note.Open(msg, note.VerifierList(v))
	require.NoError(t, err)
	require.Len(t, n.Sigs, 1)
	require.Equal(t, witness.NoteKeyName(k.KeyID()), n.Sigs[0].Name)
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	require.Equal(t, []string{"oml/tenant/" + h.Tenant.String(), "42", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="}, lines)
	raw, _ := hex.DecodeString(h.Hash)
	require.Len(t, raw, 32)

	// Another key's verifier refuses it; a changed body is refused.
	other, err := keys.Generate()
	require.NoError(t, err)
	ov, err := note.NewVerifier(witness.VerifierKey(other.KeyID(), other.Public()))
	require.NoError(t, err)
	_, err = note.Open(msg, note.VerifierList(ov))
	require.Error(t, err)
	tampered := []byte(strings.Replace(string(msg), "\n42\n", "\n43\n", 1))
	_, err = note.Open(tampered, note.VerifierList(v))
	require.Error(t, err)
}

// TestPublishCheckpoint_PutIfAbsent_SameIsNoOpOtherIsConflict.
func TestPublishCheckpoint_PutIfAbsent_SameIsNoOpOtherIsConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := keys.Generate()
	require.NoError(t, err)
	st := store.NewMem()
	h := checkpointHead(t, 7, "cd")
	require.NoError(t, witness.PublishCheckpoint(ctx, st, h, k))
	require.NoError(t, witness.PublishCheckpoint(ctx, st, h, k), "the same checkpoint again is a no-op")
	got, err := st.Get(ctx, witness.CheckpointKey(h.Tenant, 7))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(got), "oml/tenant/"))

	fork := checkpointHead(t, 7, "ef")
	require.ErrorIs(t, witness.PublishCheckpoint(ctx, st, fork, k), witness.ErrCheckpointConflict)

	// The JSON heads' listing ignores checkpoint files.
	newest, bad, err := witness.Newest(ctx, st, nil, func(string, uuid.UUID, int64) (ed25519.PublicKey, bool) { return nil, false })
	require.NoError(t, err)
	require.Empty(t, newest)
	require.Empty(t, bad)
}

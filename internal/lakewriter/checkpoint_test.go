package lakewriter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/note"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrain_WitnessPublisher_AlsoWritesC2SPCheckpoints: every head the lake
// writer witnesses is also published as a signed-note checkpoint that an
// independent verifier opens with the deployment key's verifier key, and
// whose tree size and root hash are the JSON head's seq and hash.
func TestDrain_WitnessPublisher_AlsoWritesC2SPCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 12})
	lake := store.NewMem()
	b.drainInto(t, lake)

	v, err := note.NewVerifier(witness.VerifierKey(b.key.KeyID(), b.key.Public()))
	require.NoError(t, err)
	infos, err := lake.List(ctx, witness.Prefix, "")
	require.NoError(t, err)
	checkpoints := 0
	for _, info := range infos {
		if !strings.HasSuffix(info.Key, witness.CheckpointSuffix) {
			continue
		}
		checkpoints++
		msg, err := lake.Get(ctx, info.Key)
		require.NoError(t, err)
		n, err := note.Open(msg, note.VerifierList(v))
		require.NoError(t, err, info.Key)
		head, err := witness.Read(ctx, lake, strings.TrimSuffix(info.Key, witness.CheckpointSuffix)+".json")
		require.NoError(t, err)
		body, err := head.CheckpointBody()
		require.NoError(t, err)
		require.Equal(t, string(body), n.Text)
	}
	require.Positive(t, checkpoints)
}

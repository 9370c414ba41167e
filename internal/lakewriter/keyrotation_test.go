package lakewriter_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/keyring"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/witness"
	"github.com/omlhq/oml/internal/workload"
)

// TestDrain_KeyRotatedAndOldRevoked_WriterPicksUpTheNewKeyWithoutRestart:
// one Drainer, whose key file is replaced by a rotated key and whose old
// key is then revoked: it goes on dead-lettering (materialize.skipped
// signed by the new key, which the journal accepts) and witnessing heads
// under the new key, with no restart; every chain verifies.
func TestDrain_KeyRotatedAndOldRevoked_WriterPicksUpTheNewKeyWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	path := filepath.Join(t.TempDir(), "deploy.key")
	require.NoError(t, keys.WriteFile(path, b.key, keys.WriteOptions{}))
	rk, err := keys.OpenReloading(path, time.Millisecond)
	require.NoError(t, err)
	lake := store.NewMem()
	o := b.opts(lake)
	o.Signer = rk
	o.WitnessInterval = time.Nanosecond
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.load(t, workload.Config{Claims: 10, Seed: 61})
	b.drainAll(t, d)

	next, err := keys.Generate()
	require.NoError(t, err)
	_, err = keyring.Rotate(ctx, b.pool, b.key, next)
	require.NoError(t, err)
	require.NoError(t, keys.WriteFile(path, next, keys.WriteOptions{Force: true}))
	time.Sleep(2 * time.Millisecond) // past the reload check interval
	_, err = keyring.Revoke(ctx, b.pool, next, b.key.KeyID(), "test", "rotated")
	require.NoError(t, err)

	_, err = workload.Run(ctx, b.pool, next, workload.Config{Tenants: b.tenants, Claims: 10, PromoteRatio: 0.7, Poison: 1, Seed: 62})
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Len(t, sum.DeadLettered, 1, "the poison row was dead-lettered: materialize.skipped signed by the new key")
	require.Equal(t, next.KeyID(), rk.Current().KeyID())
	require.NoError(t, rk.Err())

	var signer string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT key_id FROM oml.journal WHERE event_type = 'materialize.skipped'`).Scan(&signer))
	require.Equal(t, next.KeyID(), signer)
	trusted, err := chainverify.IssuedKeys(ctx, b.pool)
	require.NoError(t, err)
	newest, bad, err := witness.Newest(ctx, lake, nil, trusted)
	require.NoError(t, err)
	require.Empty(t, bad)
	for _, h := range newest {
		require.Equal(t, next.KeyID(), h.KeyID, "heads witnessed after the rotation are signed by the new key")
	}

	rep, err := chainverify.VerifyDB(ctx, b.pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, rep.Findings)
}

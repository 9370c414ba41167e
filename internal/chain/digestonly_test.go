package chain_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// No body bytes and no data key, in any encoding, ever reach the journal or
// the outbox: they hold digests only.
func TestAppend_JournalAndOutboxAreDigestOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "digests")
	body := bytes.Repeat([]byte("CIPHERTEXT-BYTES-"), 8)
	dek := bytes.Repeat([]byte{0xAB}, 32)
	_, err := chain.Append(ctx, b.pool, b.key, tn,
		submitWith(t, "a", 1, "alice", "human", body, dek), promote("a", 1, "bob"),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "a", Version: 1, By: "carol"}))
	require.NoError(t, err)

	secrets := map[string][]byte{}
	for name, v := range map[string][]byte{"body": body, "dek": dek} {
		secrets[name+" raw"] = v
		secrets[name+" hex"] = []byte(hex.EncodeToString(v))
		secrets[name+" base64"] = []byte(base64.StdEncoding.EncodeToString(v))
	}
	rows, err := b.pool.Query(ctx, `SELECT payload FROM oml.journal UNION ALL SELECT convert_to(payload::text, 'UTF8') FROM oml.outbox`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var p []byte
		require.NoError(t, rows.Scan(&p))
		for name, s := range secrets {
			require.False(t, bytes.Contains(p, s), "a payload contains the %s: %s", name, p)
		}
		n++
	}
	require.NoError(t, rows.Err())
	require.Greater(t, n, 5)
}

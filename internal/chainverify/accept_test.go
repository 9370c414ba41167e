package chainverify_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/witness"
)

// TestAcceptances_CoverExactlyTheNamedLostHeads: an acceptance covers the
// lost heads it names, by seq and hash, and nothing else — a later,
// different loss (another hash at that seq, or another seq) is still a
// finding; and it excuses only witnesses published before it.
func TestAcceptances_CoverExactlyTheNamedLostHeads(t *testing.T) {
	t.Parallel()
	tn := uuid.New()
	h := bytes.Repeat([]byte{7}, 32)
	at := time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)
	acc := chainverify.Acceptances{tn: {{ProviderSeq: 9, RecordedAt: at, ChainForkAccepted: journal.ChainForkAccepted{
		TenantID: tn.String(), Lost: []journal.LostHead{{Source: "witness", Seq: 68, Hash: hex.EncodeToString(h)}}}}}}
	a, ok := acc.Covers(tn, chainverify.Head{Seq: 68, Hash: h})
	require.True(t, ok)
	require.EqualValues(t, 9, a.ProviderSeq)
	_, ok = acc.Covers(tn, chainverify.Head{Seq: 68, Hash: bytes.Repeat([]byte{8}, 32)})
	require.False(t, ok, "another hash at the accepted seq is a new loss")
	_, ok = acc.Covers(tn, chainverify.Head{Seq: 69, Hash: h})
	require.False(t, ok)
	_, ok = acc.Covers(uuid.New(), chainverify.Head{Seq: 68, Hash: h})
	require.False(t, ok)

	require.True(t, acc.Excuses(&witness.Head{Tenant: tn, Seq: 50, Time: at.Add(-time.Second)}))
	require.False(t, acc.Excuses(&witness.Head{Tenant: tn, Seq: 50, Time: at.Add(time.Second)}), "a witness after the acceptance must be extended")
}

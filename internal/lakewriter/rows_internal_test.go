package lakewriter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// TestStrictJSON_AnythingAfterTheValue_IsRefused: a payload is one JSON
// value and nothing else, a stray closing bracket included.
func TestStrictJSON_AnythingAfterTheValue_IsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"state":"held"}`, true},
		{" {\"state\":\"held\"} \n", true},
		{`{"state":"held"}]`, false},
		{`{"state":"held"}}`, false},
		{`{"state":"held"}{}`, false},
		{`{"state":"held"} x`, false},
		{``, false},
		{`{"state":`, false},
	} {
		var p journal.RetractPayload
		err := strictJSON(c.in, &p)
		if c.ok {
			require.NoError(t, err, "%q", c.in)
			require.Equal(t, "held", p.State)
		} else {
			require.Error(t, err, "%q", c.in)
		}
	}
}

func submittedEvent(t *testing.T, tenant uuid.UUID, seq int64, artifact string) *event {
	t.Helper()
	digest := strings.Repeat("ab", 32)
	p, err := json.Marshal(journal.ClaimSubmitted{ArtifactID: artifact, Version: 1, WorkareaID: "w", Writer: "writer",
		Principal: "p", Provenance: "test", PlaintextDigest: digest, CiphertextDigest: digest})
	require.NoError(t, err)
	return &event{tenant: tenant, seq: seq, eventType: string(journal.TypeClaimSubmitted), payload: p}
}

// TestPayloadMemo_SameEventOtherBytes_IsDecodedAndHashedAfresh: the lineage
// check's memo reuses a decode only for the same type and payload bytes,
// and a hash check only for the same event read; an event of the same
// tenant and seq with other content is decoded and checked on its own.
func TestPayloadMemo_SameEventOtherBytes_IsDecodedAndHashedAfresh(t *testing.T) {
	t.Parallel()
	tn := uuid.New()
	m := payloadMemo{}
	a := submittedEvent(t, tn, 7, "artifact-a")
	b := submittedEvent(t, tn, 7, "artifact-b")

	pa, err := m.decode(a)
	require.NoError(t, err)
	require.Equal(t, "artifact-a", pa.(journal.ClaimSubmitted).ArtifactID)
	pb, err := m.decode(b)
	require.NoError(t, err)
	require.Equal(t, "artifact-b", pb.(journal.ClaimSubmitted).ArtifactID, "other bytes, same tenant and seq")
	again, err := m.decode(submittedEvent(t, tn, 7, "artifact-b"))
	require.NoError(t, err)
	require.Equal(t, pb, again)

	// Hashes: a (no hash stored) fails; a copy of it with its true hash
	// passes, though its type and payload are a's.
	require.Error(t, m.checkHash(a))
	good := *a
	good.prevHash = make([]byte, chain.HashSize)
	r := chain.Record{TenantID: good.tenant, Seq: uint64(good.seq), EventType: good.eventType, Payload: good.payload}
	enc, err := r.Envelope().Encode()
	require.NoError(t, err)
	h := chain.EnvelopeHash(enc)
	good.hash = h[:]
	require.NoError(t, m.checkHash(&good), "another event read, checked on its own")
	require.Error(t, m.checkHash(a), "and a's verdict is still a's")
}

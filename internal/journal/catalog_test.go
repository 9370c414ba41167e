package journal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

func TestDecode_RoundTripsEveryTypeAndIsStrict(t *testing.T) {
	t.Parallel()
	h := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	payloads := []journal.Payload{
		journal.KeyIssued{KeyID: "0123456789abcdef0123456789abcdef", Algorithm: "ed25519", PublicKey: "vKjym/wP03WxaxNEedzpyrzaTmz3EDDJFdEjyNXYf7w=", Role: "root"},
		journal.TenantCreated{TenantID: "3f2504e0-4f89-11d3-9a0c-0305e82c3301", Name: "acme"},
		journal.TenantGenesis{TenantID: "3f2504e0-4f89-11d3-9a0c-0305e82c3301", Name: "acme", ProviderSeq: 2, ProviderHash: h},
		journal.ClaimPromoted{ArtifactID: "a", Version: 1, By: "bob"},
		journal.ClaimDemoted{ArtifactID: "a", Version: 1, By: "bob", Reason: "wrong"},
		journal.ClaimErased{ArtifactID: "a", By: "dpo"},
		journal.ClaimReassigned{ArtifactID: "a", Version: 1, By: "bob", ToWorkareaID: "wa-2"},
		journal.SimulationEnded{SimulationID: "sim-1", By: "ops", Claims: []journal.ClaimRef{{ArtifactID: "a", Version: 1}}},
		journal.MaterializeSkipped{OutboxSeq: 9, JournalSeq: 3, Target: "silver.claims", Op: "materialize", ArtifactID: "a", Version: 1, Attempts: 5, Error: "digest mismatch", By: "oml-lakewriter"},
		journal.DeadletterReenqueued{DeadLetterID: 1, OutboxSeq: 9, By: "ops"},
		journal.DeadletterAbandoned{DeadLetterID: 1, OutboxSeq: 9, By: "ops", Reason: "body gone for good"},
		journal.KeyRevoked{KeyID: "0123456789abcdef0123456789abcdef", By: "ops", Reason: "rotated", Heads: []journal.RevokedHead{{TenantID: "3f2504e0-4f89-11d3-9a0c-0305e82c3301", Seq: 4, Hash: h}}},
		journal.ChainTailRestored{FromSeq: 4, ToSeq: 9, ToHash: h, Source: "bronze", OutboxRows: 7, BodyLost: []journal.ClaimRef{{ArtifactID: "a", Version: 1}}, By: "ops"},
		journal.ChainForkAccepted{TenantID: "3f2504e0-4f89-11d3-9a0c-0305e82c3301", Lost: []journal.LostHead{{Source: "witness", Seq: 9, Hash: h}}, SharedSeq: 3, NewSeq: 5, NewHash: h, Reason: "failover", By: "ops"},
		journal.LakeRepaired{PlanDigest: h, By: "ops", Counts: map[string]int64{"diverged": 1},
			Tables: []journal.RepairedTable{{Table: "bronze.events", Action: "rewind", DeltaVersion: 7, TxnVersion: 40, PlanDigest: h,
				Classes: map[string]int64{"diverged": 1}, RowsRemoved: 12, Archive: "_oml_repair/x/manifest.json"}}},
	}
	for _, p := range payloads {
		ev, err := journal.New(p)
		require.NoError(t, err, p.EventType())
		got, err := journal.Decode(ev.Type, ev.Payload)
		require.NoError(t, err, p.EventType())
		require.Equal(t, p, got)
	}
	_, err := journal.Decode(journal.TypeClaimPromoted, []byte(`{"artifact_id":"a","version":1,"by":"b","body":"secret"}`))
	require.ErrorContains(t, err, "unknown field")
	_, err = journal.Decode(journal.TypeClaimPromoted, []byte(`{"artifact_id":"a","version":1,"by":"b"} {}`))
	require.ErrorContains(t, err, "trailing")
	_, err = journal.Decode("claim.teleported", []byte(`{}`))
	require.ErrorContains(t, err, "unknown event type")
	_, err = journal.New(journal.ClaimPromoted{ArtifactID: "a", Version: 0, By: "b"})
	require.ErrorContains(t, err, "version")
	_, err = journal.New(journal.ClaimSubmitted{})
	require.ErrorContains(t, err, "NewClaimSubmitted")
	// Every type but claim.submitted (it needs a body: NewClaimSubmitted)
	// has a round-trip case above.
	require.Len(t, journal.Types, len(payloads)+1)
}

func TestPayloadBytesAreStable(t *testing.T) {
	t.Parallel()
	ev := journal.MustNew(journal.ClaimPromoted{ArtifactID: "a", Version: 2, By: "bob"})
	require.Equal(t, `{"artifact_id":"a","version":2,"by":"bob"}`, string(ev.Payload))
}

func TestPrepared_RefusesNonCanonicalPayloads(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"artifact_id":"a","version":1,"by":"b"}`, // canonical: accepted
		`{"Artifact_ID":"a","version":1,"by":"b"}`,
		`{"artifact_id":"a", "version":1,"by":"b"}`,
		`{"artifact_id":"a","version":1,"by":"x","by":"b"}`,
		`{"version":1,"artifact_id":"a","by":"b"}`,
	} {
		_, err := journal.Event{Type: journal.TypeClaimPromoted, Payload: []byte(raw)}.Prepared()
		if raw == `{"artifact_id":"a","version":1,"by":"b"}` {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, journal.ErrRejected, raw)
		require.ErrorContains(t, err, "canonical", raw)
	}
}

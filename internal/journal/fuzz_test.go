package journal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

// Decode never panics, and whatever it accepts re-encodes (through New) to
// a payload that decodes to the same value: the stored bytes a verifier or
// the lake writer reads always mean one thing.
func FuzzDecodePayload(f *testing.F) {
	f.Add(uint8(3), []byte(`{"artifact_id":"a","version":1,"by":"b"}`))
	f.Add(uint8(0), []byte(`{"key_id":"0123456789abcdef0123456789abcdef","algorithm":"ed25519","public_key":"vKjym/wP03WxaxNEedzpyrzaTmz3EDDJFdEjyNXYf7w=","role":"root"}`))
	f.Add(uint8(8), []byte(`{"simulation_id":"s","by":"o","claims":[{"artifact_id":"a","version":1}]}`))
	f.Add(uint8(9), []byte(`{"outbox_seq":1,"journal_seq":1,"target":"bronze.events","op":"append","attempts":1,"error":"e","by":"w"}`))
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		typ := journal.Types[int(which)%len(journal.Types)]
		p, err := journal.Decode(typ, payload)
		if err != nil {
			return
		}
		var again journal.Event
		if typ == journal.TypeClaimSubmitted {
			again, err = journal.NewClaimSubmitted(p.(journal.ClaimSubmitted), []byte{1}, make([]byte, 32))
		} else {
			again, err = journal.New(p)
		}
		require.NoError(t, err)
		p2, err := journal.Decode(typ, again.Payload)
		require.NoError(t, err)
		require.Equal(t, p, p2)
	})
}

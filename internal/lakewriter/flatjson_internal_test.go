package lakewriter

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

// flatTypes are the payload types the row check decodes, each a fresh
// value to decode into.
var flatTypes = []func() any{
	func() any { return &journal.BronzePayload{} },
	func() any { return &journal.RetractPayload{} },
	func() any { return &journal.MaterializePayload{} },
	func() any { return &journal.LineagePayload{} },
	func() any { return &journal.ClaimPromoted{} },
	func() any { return &journal.ClaimSubmitted{} },
}

// sameAsUnmarshal fails t unless strictJSON and plainJSON of s into a fresh
// value of each type do exactly what json.Unmarshal does: the same error
// (text included) or none, and the same value. It reports how many of the
// types took the fast path.
func sameAsUnmarshal(t testing.TB, s string) (fast int) {
	for _, mk := range flatTypes {
		want := mk()
		wantErr := json.Unmarshal([]byte(s), want)
		if fastUnmarshal(s, mk()) {
			fast++
			require.NoError(t, wantErr, "the fast path took %q, which json.Unmarshal refuses into %T", s, want)
		}
		for name, dec := range map[string]func(any) error{
			"strictJSON": func(v any) error { return strictJSON(s, v) },
			"plainJSON":  func(v any) error { return plainJSON([]byte(s), v) },
		} {
			got := mk()
			err := dec(got)
			if wantErr == nil {
				require.NoError(t, err, "%s(%q) into %T", name, s, got)
			} else {
				require.EqualError(t, err, wantErr.Error(), "%s(%q) into %T", name, s, got)
			}
			require.True(t, reflect.DeepEqual(want, got), "%s(%q) into %T: %+v, json.Unmarshal: %+v", name, s, got, got, want)
		}
	}
	return fast
}

// flatCorpus: the forms the payloads come in (encoding/json's, PostgreSQL
// jsonb's text) and everything the fast path must leave to json.Unmarshal.
var flatCorpus = []string{
	`{"event_type":"claim.submitted"}`,
	`{"event_type": "claim.submitted"}`,
	` {"state":"held"} ` + "\n",
	`{"by": "u1", "state": "demoted", "reason": "r"}`,
	`{"state":"held"}]`, `{"state":"held"}}`, `{"state":"held"}{}`, `{"state":"held"} x`, ``, `{"state":`, `{`, `}`, `{}`, ` { } `, `[]`, `null`, `"x"`, `1`,
	`{"State":"held"}`, `{"STATE":"held"}`, `{"ſtate":"held"}`, `{"state":"a","state":"b"}`, `{"state":"a","State":"b"}`,
	`{"state":null}`, `{"state":1}`, `{"state":true}`, `{"state":{}}`, `{"state":["a"]}`, `{"state":"a\"b"}`, `{"state":"a\u0041"}`,
	`{"state":"a\nb"}`, "{\"state\":\"a\nb\"}", "{\"state\":\"a\tb\"}", "{\"state\":\"\xff\"}", "{\"state\":\"é\"}", "{\"state\":\"\xed\xa0\x80\"}",
	"{\"state\":\"\xef\xbf\xbd\"}", `{"st\u0061te":"held"}`, `{"unknown":"x"}`, `{"unknown":{"a":[1,2]},"state":"x"}`, `{"state":"x",}`, `{,"state":"x"}`,
	`{"state" "x"}`, `{"state":"x" "by":"y"}`, `{'state':'x'}`, "{\"state\":\"x\"}\x00", "\ufeff{\"state\":\"x\"}", "{\"state\":\"x\"}\u00a0",
	`{"submitted_seq":12,"promoted_seq":13,"state":"promoted"}`, `{"submitted_seq":-0}`, `{"submitted_seq":-}`, `{"submitted_seq":01}`,
	`{"submitted_seq":1.0}`, `{"submitted_seq":1e2}`, `{"submitted_seq":1E2}`, `{"submitted_seq":"12"}`, `{"submitted_seq":9223372036854775807}`,
	`{"submitted_seq":9223372036854775808}`, `{"submitted_seq":-9223372036854775808}`, `{"submitted_seq":-9223372036854775809}`,
	`{"submitted_seq":+1}`, `{"submitted_seq":1 }`, `{"submitted_seq":1,"submitted_seq":2}`, `{"version":3,"artifact_id":"a","by":"b"}`,
	`{"version":3.5,"artifact_id":"a"}`, `{"version":null}`, `{"version":-1}`, `{"prev_seq":0,"submitted_seq":0x1}`, "{\"state\"\t:\r\"x\"\n}",
}

// TestFlatDecode_DoesWhatJSONUnmarshalDoes: for every input of the corpus
// and every payload type, the row check's decoders accept, refuse and
// decode exactly as json.Unmarshal, and the forms the payloads are
// written in take the fast path.
func TestFlatDecode_DoesWhatJSONUnmarshalDoes(t *testing.T) {
	t.Parallel()
	for _, s := range flatCorpus {
		sameAsUnmarshal(t, s)
	}
	// The forms written: encoding/json's, and PostgreSQL jsonb's text
	// (o.payload::text), whatever the field order.
	d := strings.Repeat("ab", 32)
	for _, v := range []any{
		journal.BronzePayload{EventType: "claim.promoted"},
		journal.RetractPayload{State: journal.StateDemoted, By: "u", Reason: "why"},
		journal.MaterializePayload{WorkareaID: "w", Writer: "a", Principal: "p", Provenance: "prov é", PlaintextDigest: d,
			CiphertextDigest: d, State: "promoted", PromotedBy: "b", SubmittedSeq: 7, PromotedSeq: 9},
		journal.LineagePayload{Actor: "b", StateBefore: "held", StateAfter: "promoted", WorkareaID: "w", Writer: "a",
			Principal: "p", Provenance: "x", PlaintextDigest: d, CiphertextDigest: d, SubmittedSeq: 7, PrevSeq: 7},
		journal.ClaimPromoted{ArtifactID: "art", Version: 2, By: "b"},
		journal.ClaimSubmitted{ArtifactID: "art", Version: 2, WorkareaID: "w", Writer: "a", Principal: "p", Provenance: "x",
			PlaintextDigest: d, CiphertextDigest: d},
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.GreaterOrEqual(t, sameAsUnmarshal(t, string(b)), 1, "%s takes the fast path", b)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		require.GreaterOrEqual(t, sameAsUnmarshal(t, jsonbText(m)), 1, "%s takes the fast path", jsonbText(m))
	}
}

// jsonbText writes m as PostgreSQL writes a jsonb object: keys by length,
// then bytes; ", " and ": " between.
func jsonbText(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if len(keys[j]) < len(keys[i]) || (len(keys[j]) == len(keys[i]) && keys[j] < keys[i]) {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "%q: %s", k, v)
	}
	b.WriteString("}")
	return b.String()
}

// FuzzFlatDecode: whatever the input, the row check's decoders do what
// json.Unmarshal does (go test -fuzz FuzzFlatDecode ./internal/lakewriter/).
func FuzzFlatDecode(f *testing.F) {
	for _, s := range flatCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameAsUnmarshal(t, s) })
}

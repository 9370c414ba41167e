package lakewriter

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/omlhq/oml/internal/journal"
)

// The row check's JSON decoding, made cheap without changing what it
// refuses. Every payload the check decodes (an outbox row's, and the
// claim.promoted and claim.submitted events a materialization rests on)
// is a flat object of strings and integers, and nearly every one is
// written in one plain form: each field once, by its exact name, with a
// string of no escapes or an integer literal. flatDecode reads exactly
// that form and nothing else; for any other input (a field it does not
// know, a name in another case, a field twice, an escape, a null, a
// float, a type mismatch, a syntax error, anything after the value) it
// reports false and the caller decodes with encoding/json as before. So
// what is accepted, refused and decoded is json.Unmarshal's in every
// case: the fast path only takes inputs whose json.Unmarshal result it
// computes exactly (FuzzFlatDecode compares the two), and json.Unmarshal
// decides all others, its error text in the poison reason included.
//
// What it saves is encoding/json's reflection, its validity pre-scan and
// a string allocation per field: a decoded string is a slice of the
// payload string.

// flatMax is the most fields a flat schema has.
const flatMax = 16

// flatSchema names the fields of a flat payload type, in any order; nums
// marks (bit i) the integer fields, the others are strings.
type flatSchema struct {
	names []string
	nums  uint32
}

// flatValues are the fields a decode found (bit i of set: field i).
type flatValues struct {
	str [flatMax]string
	num [flatMax]int64
	set uint32
}

// fastJSON switches the fast path (tests and BenchmarkLoadBatch switch it
// off to compare).
var fastJSON = true

// flatDecode reads s when it is a flat object in the plain form for sc;
// false: it is not (it may still be valid JSON), and v is undefined.
func flatDecode(sc *flatSchema, s string, v *flatValues) bool {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return skipSpace(s, i+1) == len(s)
	}
	for {
		// A name: a plain string, exactly one of the schema's.
		if i >= len(s) || s[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if c := s[j]; c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
				return false
			}
			j++
		}
		if j >= len(s) {
			return false
		}
		f := -1
		for k, n := range sc.names {
			if n == s[i+1:j] {
				f = k
				break
			}
		}
		if f < 0 || v.set&(1<<f) != 0 {
			return false // unknown (or another case of a name), or a second time
		}
		i = skipSpace(s, j+1)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		i = skipSpace(s, i+1)
		if i >= len(s) {
			return false
		}
		if sc.nums&(1<<f) != 0 {
			// An integer literal: -?(0|[1-9][0-9]*), not followed by a
			// fraction or an exponent (json.Unmarshal refuses those for
			// an integer field; it says how).
			j = i
			if j < len(s) && s[j] == '-' {
				j++
			}
			switch {
			case j < len(s) && s[j] == '0':
				j++
			case j < len(s) && s[j] >= '1' && s[j] <= '9':
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			default:
				return false
			}
			if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E' || (s[j] >= '0' && s[j] <= '9')) {
				return false
			}
			n, err := strconv.ParseInt(s[i:j], 10, 64)
			if err != nil {
				return false
			}
			v.num[f] = n
		} else {
			// A string without escapes or control characters, valid
			// UTF-8 (json.Unmarshal would replace an invalid byte).
			if s[i] != '"' {
				return false
			}
			j = i + 1
			ascii := true
			for j < len(s) && s[j] != '"' {
				c := s[j]
				if c < 0x20 || c == '\\' {
					return false
				}
				if c >= utf8.RuneSelf {
					ascii = false
				}
				j++
			}
			if j >= len(s) || (!ascii && !utf8.ValidString(s[i+1:j])) {
				return false
			}
			v.str[f] = s[i+1 : j]
			j++
		}
		v.set |= 1 << f
		i = skipSpace(s, j)
		if i >= len(s) {
			return false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return skipSpace(s, i+1) == len(s)
		default:
			return false
		}
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON
// white space.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (v *flatValues) str1(f int, dst *string) {
	if v.set&(1<<f) != 0 {
		*dst = v.str[f]
	}
}

func (v *flatValues) int64At(f int, dst *int64) {
	if v.set&(1<<f) != 0 {
		*dst = v.num[f]
	}
}

func (v *flatValues) intAt(f int, dst *int) {
	if v.set&(1<<f) != 0 {
		*dst = int(v.num[f]) // int is 64 bits wherever oml builds (flatFits)
	}
}

// flatFits: an int holds every int64, so json.Unmarshal's overflow check
// of an int field is ParseInt's.
const flatFits = strconv.IntSize == 64

var (
	bronzeSchema  = flatSchema{names: []string{"event_type"}}
	retractSchema = flatSchema{names: []string{"state", "by", "reason"}}
	matSchema     = flatSchema{names: []string{"workarea_id", "writer", "principal", "provenance", "plaintext_digest",
		"ciphertext_digest", "state", "promoted_by", "submitted_seq", "promoted_seq"}, nums: 1<<8 | 1<<9}
	lineageSchema = flatSchema{names: []string{"actor", "reason", "state_before", "state_after", "workarea_id",
		"to_workarea_id", "writer", "principal", "provenance", "plaintext_digest", "ciphertext_digest",
		"submitted_seq", "prev_seq"}, nums: 1<<11 | 1<<12}
	promotedSchema  = flatSchema{names: []string{"artifact_id", "version", "by"}, nums: 1 << 1}
	submittedSchema = flatSchema{names: []string{"artifact_id", "version", "workarea_id", "writer", "principal",
		"provenance", "plaintext_digest", "ciphertext_digest"}, nums: 1 << 1}
)

// fastUnmarshal is json.Unmarshal of s into v for the flat payload types
// when s is in the plain form; false: decode it with json.Unmarshal.
func fastUnmarshal(s string, v any) bool {
	if !fastJSON {
		return false
	}
	var f flatValues
	switch p := v.(type) {
	case *journal.BronzePayload:
		if !flatDecode(&bronzeSchema, s, &f) {
			return false
		}
		f.str1(0, &p.EventType)
	case *journal.RetractPayload:
		if !flatDecode(&retractSchema, s, &f) {
			return false
		}
		f.str1(0, &p.State)
		f.str1(1, &p.By)
		f.str1(2, &p.Reason)
	case *journal.MaterializePayload:
		if !flatDecode(&matSchema, s, &f) {
			return false
		}
		f.str1(0, &p.WorkareaID)
		f.str1(1, &p.Writer)
		f.str1(2, &p.Principal)
		f.str1(3, &p.Provenance)
		f.str1(4, &p.PlaintextDigest)
		f.str1(5, &p.CiphertextDigest)
		f.str1(6, &p.State)
		f.str1(7, &p.PromotedBy)
		f.int64At(8, &p.SubmittedSeq)
		f.int64At(9, &p.PromotedSeq)
	case *journal.LineagePayload:
		if !flatDecode(&lineageSchema, s, &f) {
			return false
		}
		f.str1(0, &p.Actor)
		f.str1(1, &p.Reason)
		f.str1(2, &p.StateBefore)
		f.str1(3, &p.StateAfter)
		f.str1(4, &p.WorkareaID)
		f.str1(5, &p.ToWorkareaID)
		f.str1(6, &p.Writer)
		f.str1(7, &p.Principal)
		f.str1(8, &p.Provenance)
		f.str1(9, &p.PlaintextDigest)
		f.str1(10, &p.CiphertextDigest)
		f.int64At(11, &p.SubmittedSeq)
		f.int64At(12, &p.PrevSeq)
	case *journal.ClaimPromoted:
		if !flatFits || !flatDecode(&promotedSchema, s, &f) {
			return false
		}
		f.str1(0, &p.ArtifactID)
		f.intAt(1, &p.Version)
		f.str1(2, &p.By)
	case *journal.ClaimSubmitted:
		if !flatFits || !flatDecode(&submittedSchema, s, &f) {
			return false
		}
		f.str1(0, &p.ArtifactID)
		f.intAt(1, &p.Version)
		f.str1(2, &p.WorkareaID)
		f.str1(3, &p.Writer)
		f.str1(4, &p.Principal)
		f.str1(5, &p.Provenance)
		f.str1(6, &p.PlaintextDigest)
		f.str1(7, &p.CiphertextDigest)
	default:
		return false
	}
	return true
}

// strictJSON decodes one JSON value, and nothing after it, into v: it is
// json.Unmarshal. (json.Unmarshal refuses any data after the value; a
// Decoder's More let a stray closing bracket through, and costs a buffer
// and a second scan.) A flat payload in the plain form takes the fast path.
func strictJSON(s string, v any) error {
	if fastUnmarshal(s, v) {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

// plainJSON is json.Unmarshal of a journal event's payload (the row
// check's plain decode of a claim.promoted or claim.submitted), with the
// fast path: one string copy of b, which the decoded strings share.
func plainJSON(b []byte, v any) error {
	if fastUnmarshal(string(b), v) {
		return nil
	}
	return json.Unmarshal(b, v)
}

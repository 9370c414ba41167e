package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Every table commit encodes one commitInfo and one stats object per data
// file. Through encoding/json's map encoder (reflection, and a sort of each
// map's keys through reflect.Value) that was about 5% of a 10,000-table
// drain's CPU, so both are appended here without reflection. The output is
// byte for byte what marshalNoEscape gives for the same value
// (jsonappend_test.go holds the two side by side on random values): keys
// in encoding/json's map order (bytewise), no HTML escaping, numbers in
// its formats. A value of a type not listed in appendJSON is handed to
// encoding/json itself, so nothing depends on this file knowing it.

// appendJSON appends v's JSON to dst, exactly as marshalNoEscape(v).
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendJSONString(dst, v), nil
	case *string:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendJSONString(dst, *v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case float32:
		return appendJSONFloat(dst, float64(v), 32, v)
	case float64:
		return appendJSONFloat(dst, v, 64, v)
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendJSONObject(dst, v)
	case map[string]string:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendJSONObject(dst, v)
	case map[string]*string: // partition values, tags
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendJSONObject(dst, v)
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// appendJSONObject appends m with its keys sorted bytewise, as
// encoding/json orders a map's keys.
func appendJSONObject[V any](dst []byte, m map[string]V) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendJSON(dst, m[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONFloat appends f in encoding/json's format for a float of the
// given bits: the shortest decimal that reads back, exponent form below
// 1e-6 or from 1e21 with the exponent's leading zero dropped. NaN and Inf
// are encoding/json's error (orig is the value, for its message).
func appendJSONFloat(dst []byte, f float64, bits int, orig any) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		_, err := marshalNoEscape(orig)
		if err == nil {
			err = fmt.Errorf("delta: %v cannot be encoded in JSON", f)
		}
		return nil, err
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

const lowerHex = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes a string with
// HTML escaping off: control characters, '"' and '\' escaped, invalid
// UTF-8 replaced by U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[b>>4], lowerHex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// statLeaf is one value of a stats object nested like the schema: path is
// the column's field names from the top level down.
type statLeaf struct {
	path []string
	val  any
}

// appendNested appends leaves as one object nested by their paths, with
// every level's keys in encoding/json's map order. No path may be a prefix
// of another (a schema's leaf columns never are); of equal paths the last
// wins, as when the same key is set twice in a map.
func appendNested(dst []byte, leaves []statLeaf) ([]byte, error) {
	slices.SortStableFunc(leaves, func(a, b statLeaf) int { return slices.Compare(a.path, b.path) })
	dst = append(dst, '{')
	var open []string // the objects open below this one
	fresh := true     // nothing written yet in the innermost open object
	for i, l := range leaves {
		if i+1 < len(leaves) && slices.Equal(l.path, leaves[i+1].path) {
			continue // a later value for the same key
		}
		// Sorted, a path is followed by the paths it is a prefix of.
		if i+1 < len(leaves) && isPrefix(l.path, leaves[i+1].path) {
			return nil, fmt.Errorf("delta: statistics for column %v and a column inside it", l.path)
		}
		parent := l.path[:len(l.path)-1]
		k := 0
		for k < len(open) && k < len(parent) && open[k] == parent[k] {
			k++
		}
		for ; len(open) > k; open = open[:len(open)-1] {
			dst = append(dst, '}')
			fresh = false
		}
		for _, name := range parent[k:] {
			if !fresh {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, name)
			dst = append(dst, ':', '{')
			open = append(open, name)
			fresh = true
		}
		if !fresh {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, l.path[len(l.path)-1])
		dst = append(dst, ':')
		var err error
		if dst, err = appendJSON(dst, l.val); err != nil {
			return nil, err
		}
		fresh = false
	}
	for range open {
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// isPrefix reports whether p is a proper prefix of q.
func isPrefix(p, q []string) bool {
	return len(p) < len(q) && slices.Equal(p, q[:len(p)])
}

// appendAction appends a's line (without its '\n') when a is an add with
// none of the fields this writer refuses, a txn or a commitInfo, and
// reports false, appending nothing, for any other action.
func appendAction(dst []byte, a *Action) (_ []byte, _ bool, err error) {
	switch {
	case a.Add != nil:
		add := a.Add
		if add.DeletionVector != nil || add.BaseRowID != nil || add.DefaultRowCommitVersion != nil || add.ClusteringProvider != nil {
			return dst, false, nil
		}
		dst = append(dst, `{"add":{"path":`...)
		dst = appendJSONString(dst, add.Path)
		dst = append(dst, `,"partitionValues":`...)
		if dst, err = appendJSON(dst, add.PartitionValues); err != nil {
			return nil, false, err
		}
		dst = append(dst, `,"size":`...)
		dst = strconv.AppendInt(dst, add.Size, 10)
		dst = append(dst, `,"modificationTime":`...)
		dst = strconv.AppendInt(dst, add.ModificationTime, 10)
		dst = append(dst, `,"dataChange":`...)
		dst = strconv.AppendBool(dst, add.DataChange)
		if add.Stats != "" {
			dst = append(dst, `,"stats":`...)
			dst = appendJSONString(dst, add.Stats)
		}
		if len(add.Tags) > 0 {
			dst = append(dst, `,"tags":`...)
			if dst, err = appendJSON(dst, add.Tags); err != nil {
				return nil, false, err
			}
		}
		return append(dst, "}}"...), true, nil
	case a.Txn != nil:
		dst = append(dst, `{"txn":{"appId":`...)
		dst = appendJSONString(dst, a.Txn.AppID)
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, a.Txn.Version, 10)
		if a.Txn.LastUpdated != nil {
			dst = append(dst, `,"lastUpdated":`...)
			dst = strconv.AppendInt(dst, *a.Txn.LastUpdated, 10)
		}
		return append(dst, "}}"...), true, nil
	case len(a.CommitInfo) > 0:
		// encoding/json writes a RawMessage compacted (HTML escaping off).
		var b bytes.Buffer
		if err := json.Compact(&b, a.CommitInfo); err != nil {
			return dst, false, nil // encoding/json reports it, in its words
		}
		dst = append(dst, `{"commitInfo":`...)
		dst = append(dst, b.Bytes()...)
		return append(dst, '}'), true, nil
	}
	return dst, false, nil
}

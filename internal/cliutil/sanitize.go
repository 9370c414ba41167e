package cliutil

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sanitize makes an untrusted string safe to print on a terminal: every
// control character (C0, DEL, C1: ESC, BEL, CR, LF, TAB, CSI...), every
// Unicode bidirectional override or isolate, and every byte that is not
// valid UTF-8 is shown as a visible escape (\x1b, \u202e) instead of being
// sent to the terminal, where it could move the cursor, retitle the
// window, hide text, reorder a line or break a TSV column. Printable text,
// non-ASCII letters included, is unchanged. Anything a tenant, the
// application role or a lake file controls (artifact ids, error texts,
// payloads, lake details) goes through it before reaching table output;
// Table and KeyValues apply it to every cell.
func Sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s // the common case: printable ASCII
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isBidiControl reports the Unicode bidirectional formatting characters
// (embeddings, overrides, isolates and marks) that reorder how a line is
// displayed ("Trojan Source").
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func sanitizeAll(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = Sanitize(c)
	}
	return out
}

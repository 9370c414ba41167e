package cliutil_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
)

func TestSanitize_EscapesEveryTerminalControl(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain-artifact v1":             "plain-artifact v1",
		"café ünïcode 漢字 🙂":             "café ünïcode 漢字 🙂",
		"a\x1b]0;pwned\x07b":            `a\x1b]0;pwned\x07b`,
		"\x1b[2J\x1b[Hclear":            `\x1b[2J\x1b[Hclear`,
		"tab\there\nnew\rline":          `tab\x09here\x0anew\x0dline`,
		"del\x7f":                       `del\x7f`,
		"c1 \u009b31m csi":              `c1 \u009b31m csi`,
		"bidi \u202eevil\u202c \u2066x": `bidi \u202eevil\u202c \u2066x`,
		"bad utf8 \xff\xfe end":         `bad utf8 \xff\xfe end`,
		"truncated \xe2\x82":            `truncated \xe2\x82`,
	} {
		require.Equal(t, want, cliutil.Sanitize(in), "%q", in)
	}
}

func TestTableAndKeyValues_NeverPrintControlCharacters(t *testing.T) {
	t.Parallel()
	evil := "art\x1b]52;c;ZXZpbA==\x07\x1b[1A"
	for _, tty := range []bool{false, true} {
		io, _, out, _ := iostreams.Test()
		io.SetStdoutTTY(tty)
		require.NoError(t, cliutil.Table(io, []string{"A", "B\x1b"}, [][]string{{evil, "x\ty"}}))
		require.NotContains(t, out.String(), "\x1b", "tty=%v", tty)
		require.Contains(t, out.String(), `art\x1b]52;c;ZXZpbA==\x07\x1b[1A`)
		if !tty {
			require.Equal(t, 2, strings.Count(out.String(), "\t"), "a tab in a cell must not add a TSV column")
		}
	}
	var b strings.Builder
	require.NoError(t, cliutil.KeyValues(&b, [][2]string{{"claim", evil}}))
	require.NotContains(t, b.String(), "\x1b")
}

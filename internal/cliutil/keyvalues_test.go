package cliutil

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"
)

// words is every space-separated word of s, to check nothing was cut.
func words(s string) []string { return strings.Fields(s) }

func TestFitKeyValues_At80_WrapsLongValuesUnderTheirColumn_CutsNothing(t *testing.T) {
	t.Parallel()
	lease := "drain-1 on lake-host.example.internal, pid 4242, since 2026-01-02T03:04:05Z, heartbeat 2026-01-02T03:04:07Z, live"
	token := strings.Repeat("x", 120) // no space to break at: hard-wrapped, still whole
	pairs := [][2]string{{"frontier", "1000 (updated 2026-01-02T03:04:05Z)"}, {"lease", lease}, {"digest", token}}
	var b bytes.Buffer
	require.NoError(t, FitKeyValues(&b, 80, pairs))
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 80, out)
	}
	require.Equal(t, "frontier:  1000 (updated 2026-01-02T03:04:05Z)", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "lease:     drain-1 "), out)
	require.True(t, strings.HasPrefix(lines[2], strings.Repeat(" ", 11)), "the continuation is indented to the value column:\n%s", out)
	// Every word of the values is there, in order: nothing is cut.
	var got []string
	for _, l := range lines {
		f := words(l)
		if len(f) > 0 && strings.HasSuffix(f[0], ":") && (f[0] == "frontier:" || f[0] == "lease:" || f[0] == "digest:") {
			f = f[1:]
		}
		got = append(got, f...)
	}
	want := append(append(words("1000 (updated 2026-01-02T03:04:05Z)"), words(lease)...), token)
	require.Equal(t, want, mergeHardWrapped(got, len(want)), out)
}

// mergeHardWrapped joins the pieces of the x-token a hard wrap split.
func mergeHardWrapped(got []string, _ int) []string {
	var out []string
	for _, g := range got {
		if len(out) > 0 && strings.Trim(g, "x") == "" && strings.Trim(out[len(out)-1], "x") == "" {
			out[len(out)-1] += g
			continue
		}
		out = append(out, g)
	}
	return out
}

func TestFitKeyValues_LongKeysLeaveNoRoom_ValueGoesUnderItsKey(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{{strings.Repeat("k", 30), "a value that does not fit beside so long a key"}, {"b", "short"}}
	var b bytes.Buffer
	require.NoError(t, FitKeyValues(&b, 40, pairs))
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Equal(t, strings.Repeat("k", 30)+":", lines[0], out)
	require.True(t, strings.HasPrefix(lines[1], "    a value"), out)
	for _, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 40, out)
	}
	require.Contains(t, out, "b:")
	require.Contains(t, strings.Join(words(out), " "), "a value that does not fit beside so long a key")
}

// Off a terminal (no width) the lines are as KeyValues always printed
// them: one per pair, never wrapped.
func TestFitKeyValues_NoWidth_OneLinePerPairAsBefore(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40)
	var a, b bytes.Buffer
	require.NoError(t, FitKeyValues(&a, 0, [][2]string{{"k", long}, {"key", "v"}}))
	require.NoError(t, KeyValues(&b, [][2]string{{"k", long}, {"key", "v"}}))
	require.Equal(t, b.String(), a.String())
	require.Equal(t, "k:    "+long+"\nkey:  v\n", a.String())
}

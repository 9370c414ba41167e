package e2e_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// age is a duration word ("21s", "(10s", "1m5s,"): two runs seconds apart
// may print different ones.
var age = regexp.MustCompile(`^\(?[0-9][0-9hms.]*s\)?,?$`)

// Key: value screens on a terminal fit its width: at 80 (and 50) columns
// no key: value line of `oml status` or `oml lake status` is wider, and a
// long value (dead letters, continuity) wraps under its value column with
// every word of it still there.
func TestBinary_KeyValuesOnPty_FitTheWidthAt80And50(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "1", "--claims", "6", "--poison", "2", "--seed", "5")
	e.ok(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")
	for _, tc := range []struct {
		cols int
		args []string
	}{{80, []string{"lake", "status"}}, {50, []string{"status"}}, {50, []string{"lake", "status"}}} {
		args, cols := tc.args, tc.cols
		// The key: value lines: everything above the first blank line (a
		// table may follow; tables are the other test's business).
		kv := func(out string) []string {
			var ls []string
			for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
				if strings.TrimSpace(l) == "" {
					break
				}
				ls = append(ls, l)
			}
			return ls
		}
		// The two runs are seconds apart: ages ("(10s ago)") may differ.
		words := func(ls []string) []string {
			ws := strings.Fields(strings.Join(ls, " "))
			for i, w := range ws {
				ws[i] = age.ReplaceAllString(w, "AGE")
			}
			return ws
		}
		// The state may move between the runs: the horizon is the whole
		// cluster's, and the other tests' transactions in it hold it back
		// for a moment. So the runs are taken again (five times at most)
		// until a wide run before and one after agree with the narrow one:
		// a fitting that cuts words fails every time.
		var wide, r result
		for attempt := 0; ; attempt++ {
			wide = e.tty(t, 400, "", args...)
			r = e.tty(t, cols, "", args...)
			after := e.tty(t, 400, "", args...)
			w := words(kv(wide.stdout))
			if attempt == 4 || slices.Equal(w, words(kv(after.stdout))) && slices.Equal(w, words(kv(r.stdout))) {
				break
			}
		}
		require.Equal(t, wide.code, r.code, "oml %s: %s", strings.Join(args, " "), r.stdout)
		require.Contains(t, []cliutil.ExitCode{cliutil.ExitOK, cliutil.ExitFindings}, r.code, r.stdout)
		long := 0
		for _, l := range kv(wide.stdout) {
			long = max(long, ansi.StringWidth(l))
		}
		require.Greater(t, long, cols, "oml %s should have a key: value line over the width unfitted, or this test proves nothing:\n%s", strings.Join(args, " "), wide.stdout)
		for _, l := range kv(r.stdout) {
			require.LessOrEqual(t, ansi.StringWidth(l), cols, "oml %s at %d columns:\n%s", strings.Join(args, " "), cols, r.stdout)
		}
		require.Equal(t, words(kv(wide.stdout)), words(kv(r.stdout)), "fitting only re-flows the words, it cuts none")
	}
}

// Plain tables on a terminal fit its width: at 80 and 120 columns no line
// of `deadletter list`, `lake maintain --dry-run` or `lake status --tables`
// is wider than the terminal (long cells are cut with an ellipsis, only the
// last column wraps), so a row is never broken over lines by the terminal.
func TestBinary_TablesOnPty_FitTheWidthAt80And120(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "12", "--poison", "2", "--seed", "9")
	e.ok(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")

	for _, cols := range []int{80, 120} {
		for _, args := range [][]string{
			{"deadletter", "list"},
			{"lake", "maintain", "--dry-run"},
			{"lake", "status", "--tables"},
			{"tenant", "list"},
		} {
			r := e.tty(t, cols, "", args...)
			require.Equal(t, cliutil.ExitOK, r.code, "oml %s: %s", strings.Join(args, " "), r.stdout)
			out := r.stdout // lake status: the key: value lines fit too, not only the table
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			require.Greater(t, len(lines), 1, r.stdout)
			for _, l := range lines {
				require.LessOrEqual(t, ansi.StringWidth(l), cols, "oml %s at %d columns:\n%s", strings.Join(args, " "), cols, r.stdout)
			}
			if args[0] == "deadletter" {
				// One line per dead letter starts with its id; the error wraps
				// under its own column.
				starts := 0
				for _, l := range lines[1:] {
					if l != "" && l[0] >= '0' && l[0] <= '9' {
						starts++
					}
				}
				require.Equal(t, 2, starts, r.stdout)
				require.Contains(t, lines[0], "ERROR")
			}
		}
	}
}

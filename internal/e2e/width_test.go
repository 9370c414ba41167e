package e2e_test

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

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
			out := r.stdout
			if args[0] == "lake" && args[1] == "status" {
				// The key: value lines above the table are not width-fitted
				// (only tables are); check the table.
				_, out, _ = strings.Cut(out, "\n\n")
			}
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

package cliutil

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

func TestFitTable_NarrowTerminal_CutsOthersWrapsOnlyLast(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("outbox row 104: ciphertext digest mismatch ", 6)
	header := []string{"ID", "TENANT", "TABLE", "ERROR"}
	rows := [][]string{
		{"1", "load-001 (8a4323ce-7e4c-49ee-aed6-a091d783d70c)", "8a4323ce-7e4c-49ee-aed6-a091d783d70c/silver/claims", long},
		{"22", "acme", "bronze", "short"},
	}
	for _, width := range []int{40, 80, 120} {
		var b bytes.Buffer
		require.NoError(t, FitTable(&b, width, header, rows))
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		var last strings.Builder
		inRow := false
		for _, l := range lines {
			require.LessOrEqual(t, ansi.StringWidth(l), width, "width %d: %q", width, l)
			switch {
			case strings.HasPrefix(l, "1 "):
				inRow = true
				last.WriteString(l[strings.Index(l, "outbox"):])
				require.Contains(t, l, "…", "the long middle columns are cut with an ellipsis at %d", width)
			case inRow && strings.HasPrefix(l, " "):
				last.WriteString(" " + strings.TrimSpace(l)) // a continuation line, indented to the last column
			default:
				inRow = false
			}
		}
		require.Equal(t, strings.Join(strings.Fields(long), " "), strings.Join(strings.Fields(last.String()), " "),
			"width %d: the last column wraps, whole, and nothing else does:\n%s", width, b.String())
		require.Contains(t, b.String(), "22  acme", "short cells are never cut")
	}
}

func TestFitTable_FitsAlready_Unchanged(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	require.NoError(t, FitTable(&b, 80, []string{"ID", "NAME"}, [][]string{{"1", "acme"}, {"10", "globex"}}))
	require.Equal(t, "ID  NAME\n1   acme\n10  globex\n", b.String())
}

func TestFitLine_CutsOneCellShortOfTheEdge(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", FitLine("short", 80))
	got := FitLine(strings.Repeat("x", 200), 80)
	require.Equal(t, 79, ansi.StringWidth(got))
	require.True(t, strings.HasSuffix(got, "…"))
}

// A progress line wider than the terminal must be cut on every redraw:
// otherwise it wraps and "\r" returns only to the start of its last row,
// so redraws pile up. Drawn on a real pseudo-terminal 80 columns wide.
func TestLiveLine_WideLineOnPty_EveryRedrawFitsTheWidth(t *testing.T) {
	t.Parallel()
	for _, cols := range []uint16{80, 120} {
		ptmx, tty, err := pty.Open()
		require.NoError(t, err)
		require.NoError(t, pty.Setsize(tty, &pty.Winsize{Rows: 24, Cols: cols}))
		stop := LiveLine(tty, func(el time.Duration) string {
			return "reconcile: " + strings.Repeat("tenant load-001 silver.claims 1234/5678 rows ", 8) + el.String()
		})
		// Read until two redraws have arrived (each starts with \r\x1b[K).
		var got []byte
		buf := make([]byte, 4096)
		for bytes.Count(got, []byte("\r\x1b[K")) < 3 {
			n, err := ptmx.Read(buf)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		stop()
		tty.Close()
		ptmx.Close()
		for _, seg := range strings.Split(string(got), "\r\x1b[K") {
			require.LessOrEqual(t, ansi.StringWidth(seg), int(cols)-1, "at %d columns: %q", cols, seg)
		}
	}
}

func TestCount_OneIsSingular(t *testing.T) {
	t.Parallel()
	require.Equal(t, "1 row", Count(1, "row"))
	require.Equal(t, "0 rows", Count(int64(0), "row"))
	require.Equal(t, "2 lake rows", Count(2, "lake row"))
}

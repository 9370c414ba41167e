package cliutil

import (
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Column layout of FitTable: two spaces between columns; a column other
// than the last is never cut below minColWidth cells ("ab…"), and the last
// one keeps at least lastColShare of the line (or all it needs) so that
// wrapping it stays readable.
const (
	colSep       = "  "
	minColWidth  = 4
	lastColShare = 3 // the last column gets at least width/lastColShare
	minLastWidth = 16
)

// FitTable writes header and rows as a padded table no wider than width
// terminal cells: when the natural widths do not fit, the other columns
// are cut (with an ellipsis, widest first) until the last column has room,
// and only the last column wraps, onto continuation lines indented to its
// start. Widths are display widths (wide runes count two, escape sequences
// none), so coloured or non-ASCII cells line up. This is the one layout of
// every oml table on a terminal (Table calls it); width <= 0 means no limit.
func FitTable(w io.Writer, width int, header []string, rows [][]string) error {
	all := make([][]string, 0, len(rows)+1)
	all = append(all, header)
	all = append(all, rows...)
	n := 0
	for _, r := range all {
		n = max(n, len(r))
	}
	if n == 0 {
		return nil
	}
	natural := make([]int, n) // widest cell, header included
	data := make([]int, n)    // widest cell below the header
	for j, r := range all {
		for i, c := range r {
			w := ansi.StringWidth(oneLine(c))
			natural[i] = max(natural[i], w)
			if j > 0 {
				data[i] = max(data[i], w)
			}
		}
	}
	widths := fitWidths(natural, data, width)
	var b strings.Builder
	for _, r := range all {
		writeRow(&b, r, widths)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fitWidths shrinks natural column widths to fit width (see FitTable).
// Headers wider than their column's cells are cut first ("OUTBOX SEQ"
// over three-digit seqs), then the widest cells.
func fitWidths(natural, data []int, width int) []int {
	n := len(natural)
	widths := append([]int(nil), natural...)
	avail := width - len(colSep)*(n-1)
	total := 0
	for _, w := range natural {
		total += w
	}
	if width <= 0 || total <= avail {
		return widths
	}
	last := n - 1
	wantLast := min(natural[last], max(minLastWidth, avail/lastColShare))
	budget := avail - wantLast // for the other columns
	others := total - natural[last]
	// First cut headers down to their cells, widest excess first.
	for others > budget {
		wi := -1
		for i := 0; i < last; i++ {
			floor := max(data[i], minColWidth)
			if widths[i] > floor && (wi < 0 || widths[i]-floor > widths[wi]-max(data[wi], minColWidth)) {
				wi = i
			}
		}
		if wi < 0 {
			break
		}
		widths[wi]--
		others--
	}
	// Then cut the widest other column one cell at a time: the fairest cut
	// that keeps short columns (ids, counts, states) whole.
	for others > budget {
		wi := -1
		for i := 0; i < last; i++ {
			if widths[i] > minColWidth && (wi < 0 || widths[i] > widths[wi]) {
				wi = i
			}
		}
		if wi < 0 {
			break // every other column is at its minimum: the last gets what is left
		}
		widths[wi]--
		others--
	}
	widths[last] = max(1, min(natural[last], avail-others))
	return widths
}

func writeRow(b *strings.Builder, row []string, widths []int) {
	last := len(widths) - 1
	indent := 0
	var line strings.Builder
	for i := 0; i < last; i++ {
		cell := ""
		if i < len(row) {
			cell = oneLine(row[i])
		}
		if ansi.StringWidth(cell) > widths[i] {
			cell = ansi.Truncate(cell, widths[i], "…")
		}
		line.WriteString(cell)
		line.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(cell)))
		line.WriteString(colSep)
		indent += widths[i] + len(colSep)
	}
	cell := ""
	if last < len(row) {
		cell = oneLine(row[last])
	}
	wrapped := strings.Split(ansi.Wrap(cell, widths[last], ""), "\n")
	for j, part := range wrapped {
		if j > 0 {
			line.WriteString(strings.Repeat(" ", indent))
		}
		line.WriteString(part)
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
		line.Reset()
	}
}

// oneLine makes a cell one line: a table row is one record.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

// FitLine cuts one line (a progress redraw, a status line) to at most
// width-1 cells with an ellipsis: one cell short of the edge, because a
// terminal that autowraps at the last column would otherwise start a new
// line and every redraw would pile up below the last.
func FitLine(s string, width int) string {
	if width <= 1 {
		return s
	}
	s = oneLine(s)
	if ansi.StringWidth(s) <= width-1 {
		return s
	}
	return ansi.Truncate(s, width-1, "…")
}

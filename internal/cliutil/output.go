package cliutil

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/omlhq/oml/internal/iostreams"
)

// Format is the output format selected by -o/--output.
type Format string

const (
	// FormatTable is human output (the default on a terminal).
	FormatTable Format = "table"
	// FormatJSON is one JSON document on stdout with stable snake_case fields.
	FormatJSON Format = "json"
)

// ParseFormat validates the -o flag value. An empty value means "table".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "table":
		return FormatTable, nil
	case "json":
		return FormatJSON, nil
	default:
		return "", FlagErrorf("unknown output format %q: use --output table or --output json", s)
	}
}

// WriteJSON writes v as one indented JSON document followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Table renders rows under a header. On a terminal it draws a padded
// table that fits the terminal's width (FitTable: cells cut with an
// ellipsis, only the last column wraps); otherwise it prints tab-separated
// lines (header first) that scripts can cut, never cut or wrapped.
//
// Every cell goes through Sanitize: cells often hold what a tenant or a
// lake file controls, and must never reach the terminal as control codes.
func Table(io *iostreams.IOStreams, header []string, rows [][]string) error {
	header, rows = sanitizeAll(header), sanitizeRows(rows)
	if !io.IsStdoutTTY() {
		return tsv(io.Out, header, rows)
	}
	return FitTable(io.Out, io.TerminalWidth(), header, rows)
}

func tsv(w io.Writer, header []string, rows [][]string) error {
	line := func(cells []string) error {
		for i, c := range cells {
			sep := "\t"
			if i == len(cells)-1 {
				sep = "\n"
			}
			if _, err := fmt.Fprint(w, c, sep); err != nil {
				return err
			}
		}
		return nil
	}
	if err := line(header); err != nil {
		return err
	}
	for _, r := range rows {
		if err := line(r); err != nil {
			return err
		}
	}
	return nil
}

// KeyValues prints "key: value" lines aligned on the colon, for one-object
// views; keys and values go through Sanitize, as Table's cells do.
func KeyValues(w io.Writer, pairs [][2]string) error {
	clean := make([][2]string, len(pairs))
	for i, p := range pairs {
		clean[i] = [2]string{Sanitize(p[0]), Sanitize(p[1])}
	}
	pairs = clean
	width := 0
	for _, p := range pairs {
		if len(p[0]) > width {
			width = len(p[0])
		}
	}
	for _, p := range pairs {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width+1, p[0]+":", p[1]); err != nil {
			return err
		}
	}
	return nil
}

// KeyValuesTo is KeyValues on the command's streams: on a terminal the
// lines fit its width (FitKeyValues), otherwise they print as KeyValues
// does, one line per pair, for scripts and logs.
func KeyValuesTo(ios *iostreams.IOStreams, pairs [][2]string) error {
	if !ios.IsStdoutTTY() {
		return KeyValues(ios.Out, pairs)
	}
	return FitKeyValues(ios.Out, ios.TerminalWidth(), pairs)
}

// FitKeyValues prints "key: value" lines aligned on the colon, no wider
// than width cells (width <= 0: no limit). A value too long for its line
// wraps onto continuation lines indented to the value column, so nothing
// is cut; when the keys leave the value too little room it starts on the
// next line, indented under its key, and wraps there.
func FitKeyValues(w io.Writer, width int, pairs [][2]string) error {
	if width <= 0 {
		return KeyValues(w, pairs)
	}
	clean := make([][2]string, len(pairs))
	for i, p := range pairs {
		clean[i] = [2]string{oneLine(Sanitize(p[0])), oneLine(Sanitize(p[1]))}
	}
	pairs = clean
	keyw := 0
	for _, p := range pairs {
		keyw = max(keyw, ansi.StringWidth(p[0]))
	}
	col := keyw + 1 + 2 // "key:" padded, two spaces
	var b strings.Builder
	for _, p := range pairs {
		key := p[0] + ":" + strings.Repeat(" ", col-ansi.StringWidth(p[0])-1)
		if col+ansi.StringWidth(p[1]) <= width {
			b.WriteString(strings.TrimRight(key+p[1], " "))
			b.WriteByte('\n')
			continue
		}
		indent, first := col, key
		if width-col < minLastWidth {
			indent = min(kvUnderIndent, max(width-1, 0))
			b.WriteString(p[0] + ":\n")
			first = strings.Repeat(" ", indent)
		}
		for j, part := range wrapWords(p[1], max(1, width-indent)) {
			if j == 0 {
				b.WriteString(first)
			} else {
				b.WriteString(strings.Repeat(" ", indent))
			}
			b.WriteString(strings.TrimRight(part, " "))
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapWords breaks s into lines of at most limit cells at spaces only (a
// timestamp or a path is never split at its hyphens or slashes); a word
// longer than a line is split hard, so nothing is ever cut.
func wrapWords(s string, limit int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "" && ansi.StringWidth(word) <= limit:
			cur = word
		case cur != "" && ansi.StringWidth(cur)+1+ansi.StringWidth(word) <= limit:
			cur += " " + word
		default:
			if cur != "" {
				lines = append(lines, cur)
			}
			for ansi.StringWidth(word) > limit {
				lines = append(lines, ansi.Cut(word, 0, limit))
				word = ansi.Cut(word, limit, ansi.StringWidth(word))
			}
			cur = word
		}
	}
	return append(lines, cur)
}

// kvUnderIndent indents a value printed under its key.
const kvUnderIndent = 4

// Time formats a timestamp for human output: RFC3339 in UTC, "-" when zero.
func Time(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func sanitizeRows(rows [][]string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = sanitizeAll(r)
	}
	return out
}

// Count renders n with its noun, singular for one: "1 row", "2 rows",
// "0 rows" (the noun's plural is noun+"s").
func Count[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// NonNil is s, or an empty slice when s is nil, so a list in a -o json
// document is always an array ([]), never null: scripts iterate it without
// a null check.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

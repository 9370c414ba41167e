package cliutil

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

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

package tui

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/omlhq/oml/internal/doctor"
)

type styles struct {
	title, dim, selected, key lipgloss.Style
	status                    map[doctor.Status]lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		title:    r.NewStyle().Bold(true),
		dim:      r.NewStyle().Faint(true),
		selected: r.NewStyle().Reverse(true),
		key:      r.NewStyle().Bold(true),
		status: map[doctor.Status]lipgloss.Style{
			doctor.StatusOK:      r.NewStyle().Foreground(lipgloss.Color("2")),
			doctor.StatusWarn:    r.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
			doctor.StatusFail:    r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
			doctor.StatusSkipped: r.NewStyle().Faint(true),
		},
	}
}

// View renders the screen from the model alone.
func (m Model) View() string {
	w := max(m.width, 20)
	var lines []string
	lines = append(lines, m.header())
	var body []string
	if m.detail && m.report != nil {
		body = m.detailLines(w)
		body = window(body, m.scroll, m.bodyHeight())
	} else {
		body = m.listLines()
	}
	lines = append(lines, body...)
	// Pad the body so the footer stays at the bottom of the screen.
	for len(lines) < m.height-2 {
		lines = append(lines, "")
	}
	lines = append(lines, m.sparkLine(w), m.help())
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, w, "…")
	}
	if m.height > 0 && len(lines) > m.height {
		lines = append(lines[:m.height-2], lines[len(lines)-2:]...)
	}
	return strings.Join(lines, "\n")
}

// bodyHeight is the rows between the header and the two footer lines.
func (m Model) bodyHeight() int { return max(1, m.height-3) }

func (m Model) header() string {
	h := m.st.title.Render("oml doctor") + fmt.Sprintf(" · every %s", m.interval)
	switch {
	case m.report == nil:
		h += " · running the first checks…"
	default:
		rep := m.report
		h += fmt.Sprintf(" · run %d, %s ago, took %s", m.runs, age(m.now, rep.StartedAt),
			(time.Duration(rep.DurationSeconds * float64(time.Second))).Round(time.Millisecond))
		if m.running {
			h += " · re-running…"
		}
		h += " · " + m.st.status[rep.Status].Render(strings.ToUpper(string(rep.Status)))
	}
	return h
}

func (m Model) listLines() []string {
	if m.report == nil {
		return []string{"", m.st.dim.Render("  waiting for the first results…")}
	}
	checks := m.report.Checks
	idW := len("CHECK")
	for _, c := range checks {
		idW = max(idW, len(c.ID))
	}
	out := []string{m.st.dim.Render(fmt.Sprintf("  %-7s  %-*s  %5s  %s", "STATUS", idW, "CHECK", "AGE", "SUMMARY"))}
	// Scroll the list so the cursor stays on screen.
	room := max(1, m.bodyHeight()-1)
	first := 0
	if m.cursor >= room {
		first = m.cursor - room + 1
	}
	for i := first; i < len(checks) && i < first+room; i++ {
		c := checks[i]
		marker := "  "
		if i == m.cursor {
			marker = "▸ "
		}
		status := m.st.status[c.Status].Render(fmt.Sprintf("%-7s", c.Status))
		row := fmt.Sprintf("%s%s  %-*s  %5s  %s", marker, status, idW, c.ID, shortAge(m.now, c.CheckedAt), c.Summary)
		if i == m.cursor {
			row = m.st.title.Render(marker) + status + m.st.title.Render(fmt.Sprintf("  %-*s", idW, c.ID)) +
				fmt.Sprintf("  %5s  %s", shortAge(m.now, c.CheckedAt), c.Summary)
		}
		out = append(out, row)
	}
	return out
}

// detailLines is the selected check in full, wrapped to width.
func (m Model) detailLines(w int) []string {
	c := m.report.Checks[m.cursor]
	wrap := func(s string, indent int) []string {
		pad := strings.Repeat(" ", indent)
		wrapped := ansi.Wordwrap(s, max(10, w-indent), " ")
		wrapped = ansi.Hardwrap(wrapped, max(10, w-indent), true)
		var out []string
		for _, l := range strings.Split(wrapped, "\n") {
			out = append(out, pad+l)
		}
		return out
	}
	out := []string{"",
		m.st.title.Render(c.ID) + " — " + c.Title + "  " + m.st.status[c.Status].Render(strings.ToUpper(string(c.Status))) +
			m.st.dim.Render(fmt.Sprintf("  (checked %s ago in %s)", age(m.now, c.CheckedAt), (time.Duration(c.DurationSeconds*float64(time.Second))).Round(time.Millisecond))),
		""}
	out = append(out, wrap(c.Summary, 0)...)
	if len(c.Details) > 0 {
		out = append(out, "", m.st.dim.Render("details"))
		for _, d := range c.Details {
			// Hanging indent: continuation lines align with the text, not the bullet.
			lines := wrap(d, 4)
			lines[0] = "  • " + strings.TrimPrefix(lines[0], "    ")
			out = append(out, lines...)
		}
	}
	if len(c.Data) > 0 {
		out = append(out, "", m.st.dim.Render("data"))
		keys := make([]string, 0, len(c.Data))
		for k := range c.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, wrap(k+": "+dataValue(c.Data[k]), 2)...)
		}
	}
	out = append(out, "", "runbook: "+m.st.key.Render(c.Runbook))
	return out
}

func dataValue(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("%.3f", x)
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func (m *Model) clampScroll() {
	if !m.detail || m.report == nil {
		m.scroll = 0
		return
	}
	n := len(m.detailLines(max(m.width, 20)))
	m.scroll = min(max(0, m.scroll), max(0, n-m.bodyHeight()))
}

func window(lines []string, from, n int) []string {
	if from >= len(lines) {
		return nil
	}
	return lines[from:min(len(lines), from+n)]
}

func (m Model) help() string {
	k := m.keys
	// Most needed first: a narrow screen truncates from the right.
	bs := []string{"q quit", "r re-run"}
	if m.detail {
		bs = append(bs, k.Back.Help().Key+" back", "↑/↓ scroll")
	} else {
		bs = append(bs, "↑/↓ move", k.Open.Help().Key+" details")
	}
	bs = append(bs, "+/- interval")
	return m.st.dim.Render(strings.Join(bs, " · "))
}

// sparkLine is the frontier lag over the session, newest on the right.
// Runs whose lag was unknown (the database down) are gaps, and the newest
// one unknown says so rather than showing a zero.
func (m Model) sparkLine(w int) string {
	label := "lag "
	if len(m.lag) == 0 {
		return m.st.dim.Render(label + "(no samples yet)")
	}
	last := m.lag[len(m.lag)-1]
	peak, known := 0.0, 0
	for _, v := range m.lag {
		if !math.IsNaN(v) {
			peak, known = math.Max(peak, v), known+1
		}
	}
	now, short := secs(last), secs(last)
	if math.IsNaN(last) {
		now, short = "unknown ("+m.lagWhy+")", "unknown"
	}
	suffix := fmt.Sprintf(" now %s, peak %s over %d run(s)", now, secs(peak), len(m.lag))
	if known == 0 {
		suffix = fmt.Sprintf(" now %s, unknown over %d run(s)", now, len(m.lag))
	}
	if w-len(label)-len(suffix) < 12 { // a narrow screen keeps the graph, not the words
		suffix = " " + short
	}
	room := max(1, w-len(label)-len(suffix))
	return label + Sparkline(m.lag, room) + m.st.dim.Render(suffix)
}

var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws the last width values as block characters scaled to
// their maximum (all-zero draws the lowest block); an unknown value (NaN)
// is a blank, so a gap never reads as a zero lag.
func Sparkline(vals []float64, width int) string {
	if width <= 0 || len(vals) == 0 {
		return ""
	}
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	peak := 0.0
	for _, v := range vals {
		if !math.IsNaN(v) {
			peak = math.Max(peak, v)
		}
	}
	var b strings.Builder
	for _, v := range vals {
		if math.IsNaN(v) {
			b.WriteRune(' ')
			continue
		}
		i := 0
		if peak > 0 && v > 0 {
			i = int(math.Round(v / peak * float64(len(sparkBlocks)-1)))
		}
		b.WriteRune(sparkBlocks[min(max(i, 0), len(sparkBlocks)-1)])
	}
	return b.String()
}

func secs(v float64) string {
	d := time.Duration(v * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// shortAge fits in five columns: 3s, 12m, 4h, 2d.
func shortAge(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Package tui is `oml doctor --watch`: a bubbletea (v1) terminal UI that
// re-runs the doctor checks on an interval and shows them live.
//
// Rules it keeps (one top-level model, after crush and soft-serve):
//   - No IO in Update. A run of the checks is a tea.Cmd that returns a
//     reportMsg; the clock is a tea.Tick. Update only changes state.
//   - At most one run is in flight: a tick or an "r" during a run is
//     dropped, and every run schedules the next tick only when it ends, so a
//     slow database slows the refresh instead of piling runs up.
//   - Ticks carry a generation; changing the interval or re-running now
//     bumps it, so a stale tick never triggers a second run.
//   - View is pure: it renders from the model (the clock included, which
//     arrives as a message), so a render at a fixed size is reproducible
//     and golden-tested.
package tui

import (
	"context"
	"math"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/omlhq/oml/internal/doctor"
)

// RunFunc runs every check once.
type RunFunc func(ctx context.Context) doctor.Report

// Interval bounds for + and -.
const (
	MinInterval = time.Second
	MaxInterval = 10 * time.Minute
)

// maxHistory bounds the lag sparkline's memory (one point per run).
const maxHistory = 240

// Model is the whole UI state.
type Model struct {
	ctx      context.Context
	run      RunFunc
	clock    func() time.Time
	interval time.Duration

	report  *doctor.Report
	running bool
	runs    int
	gen     int // tick generation
	now     time.Time
	lag     []float64 // lag_seconds per completed run; NaN: unknown that run
	lagWhy  string    // why the newest sample is unknown ("" when it is known)

	cursor int
	detail bool
	scroll int // first detail line shown

	width, height int
	keys          keyMap
	st            styles
}

// Option configures a Model.
type Option func(*Model)

// WithClock sets the clock the commands read (tests).
func WithClock(now func() time.Time) Option { return func(m *Model) { m.clock = now } }

// WithRenderer sets the lipgloss renderer (tests pin the colour profile).
func WithRenderer(r *lipgloss.Renderer) Option { return func(m *Model) { m.st = newStyles(r) } }

// New returns the model. run is called from commands, never from Update.
func New(ctx context.Context, run RunFunc, interval time.Duration, opts ...Option) Model {
	m := Model{ctx: ctx, run: run, clock: time.Now, interval: clampInterval(interval),
		keys: defaultKeys(), width: 80, height: 24}
	m.st = newStyles(lipgloss.DefaultRenderer())
	for _, o := range opts {
		o(&m)
	}
	m.now = m.clock()
	return m
}

// reportMsg is a finished run.
type reportMsg struct {
	rep doctor.Report
	at  time.Time
}

// tickMsg asks for the next scheduled run.
type tickMsg struct{ gen int }

// clockMsg moves the clock the view shows ages against.
type clockMsg time.Time

func clampInterval(d time.Duration) time.Duration { return min(max(d, MinInterval), MaxInterval) }

// Init starts the first run and the clock.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.runCmd(), m.clockCmd())
}

func (m Model) runCmd() tea.Cmd {
	run, ctx, clock := m.run, m.ctx, m.clock
	return func() tea.Msg {
		rep := run(ctx)
		return reportMsg{rep: rep, at: clock()}
	}
}

func (m Model) tickCmd() tea.Cmd {
	gen := m.gen
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{gen: gen} })
}

func (m Model) clockCmd() tea.Cmd {
	clock := m.clock
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return clockMsg(clock()) })
}

// startRun marks a run in flight and returns its command.
func (m *Model) startRun() tea.Cmd {
	m.running = true
	m.gen++ // any tick already scheduled is now stale
	return m.runCmd()
}

// Update handles a message; it does no IO.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.clampScroll()
		return m, nil
	case clockMsg:
		m.now = time.Time(msg)
		return m, m.clockCmd()
	case reportMsg:
		rep := msg.rep
		m.report, m.running = &rep, false
		m.runs++
		m.now = msg.at
		// A run whose lag check could not read the frontier (the database
		// down) is an unknown sample, never a zero: a gap in the graph and
		// "now unknown" beside it.
		v, why := math.NaN(), "no lag check in the report"
		if c, ok := rep.Check(doctor.IDLag); ok {
			why = "lag check " + string(c.Status)
			if f, ok := c.Data["lag_seconds"].(float64); ok && !math.IsNaN(f) {
				v, why = f, ""
			}
		}
		m.lag, m.lagWhy = append(m.lag, v), why
		if len(m.lag) > maxHistory {
			m.lag = m.lag[len(m.lag)-maxHistory:]
		}
		m.cursor = min(m.cursor, max(0, len(rep.Checks)-1))
		m.clampScroll()
		m.gen++
		return m, m.tickCmd()
	case tickMsg:
		if msg.gen != m.gen || m.running {
			return m, nil
		}
		return m, m.startRun()
	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed faster than they are read arrive as one message
			// ("jjq"): each is a key of its own.
			var cmds []tea.Cmd
			var cur tea.Model = m
			for _, r := range msg.Runes {
				var cmd tea.Cmd
				cur, cmd = cur.(Model).handleKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
				cmds = append(cmds, cmd)
			}
			return cur, tea.Batch(cmds...)
		}
		return m.handleKey(msg)
	}
	return m, nil
}

func (m Model) handleKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Rerun):
		if m.running {
			return m, nil
		}
		return m, m.startRun()
	case key.Matches(msg, k.Faster):
		m.interval = clampInterval(m.interval / 2)
		return m.reschedule()
	case key.Matches(msg, k.Slower):
		m.interval = clampInterval(m.interval * 2)
		return m.reschedule()
	}
	n := m.numChecks()
	if m.detail {
		switch {
		case key.Matches(msg, k.Back):
			m.detail, m.scroll = false, 0
		case key.Matches(msg, k.Up):
			m.scroll--
		case key.Matches(msg, k.Down):
			m.scroll++
		}
		m.clampScroll()
		return m, nil
	}
	switch {
	case key.Matches(msg, k.Up):
		if m.cursor > 0 {
			m.cursor--
		}
	case key.Matches(msg, k.Down):
		if m.cursor < n-1 {
			m.cursor++
		}
	case key.Matches(msg, k.Top):
		m.cursor = 0
	case key.Matches(msg, k.Bottom):
		m.cursor = max(0, n-1)
	case key.Matches(msg, k.Open):
		if n > 0 {
			m.detail, m.scroll = true, 0
		}
	}
	return m, nil
}

// reschedule applies a new interval: while idle, the next run is one new
// interval from now (a run in flight schedules its own tick when it ends).
func (m Model) reschedule() (tea.Model, tea.Cmd) {
	if m.running {
		return m, nil
	}
	m.gen++
	return m, m.tickCmd()
}

func (m Model) numChecks() int {
	if m.report == nil {
		return 0
	}
	return len(m.report.Checks)
}

// Interval is the current refresh interval.
func (m Model) Interval() time.Duration { return m.interval }

// Runs is how many runs have completed.
func (m Model) Runs() int { return m.runs }

// Cursor is the selected check's index.
func (m Model) Cursor() int { return m.cursor }

// InDetail reports whether a check's details are open.
func (m Model) InDetail() bool { return m.detail }

// keyMap is every binding, with its help text.
type keyMap struct {
	Up, Down, Top, Bottom, Open, Back, Rerun, Faster, Slower, Quit key.Binding
}

func defaultKeys() keyMap {
	return keyMap{
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Top:    key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom: key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
		Open:   key.NewBinding(key.WithKeys("enter", "right", "l"), key.WithHelp("enter", "details")),
		Back:   key.NewBinding(key.WithKeys("esc", "left", "h", "backspace"), key.WithHelp("esc", "back")),
		Rerun:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "re-run now")),
		Faster: key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "interval ÷2")),
		Slower: key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "interval ×2")),
		Quit:   key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a report with every status, as a broken system gives.
func fixture(run int) doctor.Report {
	at := t0.Add(time.Duration(run) * 10 * time.Second)
	mk := func(id, title string, s doctor.Status, summary string, details []string, data map[string]any) doctor.Result {
		if data == nil {
			data = map[string]any{}
		}
		return doctor.Result{ID: id, Title: title, Status: s, Summary: summary, Details: details, Data: data,
			Runbook: doctor.Runbook(id), CheckedAt: at, DurationSeconds: 0.0123}
	}
	lag := float64(run*run) * 1.5
	checks := []doctor.Result{
		mk(doctor.IDDatabase, "database reachable, schema current", doctor.StatusOK, "PostgreSQL 17.2 reachable, schema at version 4 (current)", nil,
			map[string]any{"server_version": "17.2"}),
		mk(doctor.IDLake, "lake reachable, put-if-absent honored", doctor.StatusFail,
			"s3://lake/prod does not honor put-if-absent: two lake writers could overwrite each other's commits",
			[]string{"probe of s3://lake/prod: a second put-if-absent of _oml_probe/0011 succeeded, so this store does not honor conditional writes (S3: If-None-Match: *)"},
			map[string]any{"put_if_absent": false}),
		mk(doctor.IDLease, "lake writer alive", doctor.StatusOK, "lake writer drain-1 on lake-host (pid 4242) alive, heartbeat 2s ago", nil, nil),
		mk(doctor.IDLag, "frontier lag", doctor.StatusWarn, fmt.Sprintf("120 row(s) behind (seq gap 130), oldest waiting %s", secs(lag)),
			[]string{"frontier 1000 (updated 2026-01-02T03:04:00Z), outbox last seq 1130, stable seq 1130"},
			map[string]any{"lag_seconds": lag, "backlog_rows": int64(120)}),
		mk(doctor.IDHorizon, "snapshot horizon", doctor.StatusOK, "no open transaction holds the snapshot horizon", nil, nil),
		mk(doctor.IDDeadLetters, "dead letters", doctor.StatusWarn, "2 dead letter(s), oldest 2026-01-02T02:00:00Z (1h4m5s ago): the lake is missing these rows until re-enqueued", nil, nil),
		mk(doctor.IDFork, "fork check against witnessed heads", doctor.StatusOK, "101 tenant(s) match their newest witnessed head", nil, nil),
		mk(doctor.IDChain, "chain verification (incremental)", doctor.StatusOK, "101 chain(s) intact; 12 new event(s) verified since the last verified heads", nil, nil),
		mk(doctor.IDDelta, "Delta table health", doctor.StatusOK, "303 table(s) healthy", nil, nil),
		mk(doctor.IDReconcile, "reconcile lake against journal", doctor.StatusSkipped, "not run: pass --deep for this slower check", nil, nil),
	}
	rep := doctor.Report{Status: doctor.StatusFail, Checks: checks, StartedAt: at, DurationSeconds: 0.234, Counts: map[doctor.Status]int{}}
	for _, c := range checks {
		rep.Counts[c.Status]++
	}
	return rep
}

func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// model returns a model that has completed runs runs, at a fixed clock.
func model(t *testing.T, w, h, runs int, r *lipgloss.Renderer) Model {
	t.Helper()
	clock := func() time.Time { return t0.Add(time.Duration(runs)*10*time.Second + 3*time.Second) }
	m := New(context.Background(), func(context.Context) doctor.Report { return fixture(0) }, 10*time.Second,
		WithClock(clock), WithRenderer(r))
	var tm tea.Model = m
	tm, _ = tm.Update(tea.WindowSizeMsg{Width: w, Height: h})
	for i := 1; i <= runs; i++ {
		tm, _ = tm.Update(reportMsg{rep: fixture(i), at: clock()})
	}
	return tm.(Model)
}

func keyMsg(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func press(m Model, keys ...string) Model {
	var tm tea.Model = m
	for _, k := range keys {
		tm, _ = tm.Update(keyMsg(k))
	}
	return tm.(Model)
}

// TestView_Golden renders the list and the details at fixed sizes
// (go test ./internal/doctor/tui -run TestView_Golden -update rewrites them).
func TestView_Golden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w, h int
		keys []string
		r    *lipgloss.Renderer
	}{
		{"list_80x24", 80, 24, nil, nil},
		{"list_120x30", 120, 30, nil, nil},
		{"list_narrow_40x12_cursor_scrolled", 40, 12, []string{"G"}, nil},
		{"details_lake_80x24", 80, 24, []string{"down", "enter"}, nil},
		{"details_lag_60x16_scrolled", 60, 16, []string{"j", "j", "j", "enter", "down"}, nil},
		{"list_colour_80x24", 80, 24, []string{"down"}, colourRenderer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r
			if r == nil {
				r = asciiRenderer()
			}
			m := press(model(t, tc.w, tc.h, 5, r), tc.keys...)
			v := m.View()
			for i, l := range strings.Split(v, "\n") {
				require.LessOrEqualf(t, lipgloss.Width(l), tc.w, "line %d is wider than the terminal: %q", i, l)
			}
			require.LessOrEqual(t, strings.Count(v, "\n")+1, tc.h, "more lines than the terminal has rows")
			golden.RequireEqual(t, []byte(v))
		})
	}
}

func colourRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI)
	return r
}

func TestView_ColourOnlyWithAColourProfile(t *testing.T) {
	t.Parallel()
	plain := model(t, 80, 24, 1, asciiRenderer()).View()
	require.NotContains(t, plain, "\x1b[")
	coloured := model(t, 80, 24, 1, colourRenderer()).View()
	require.Regexp(t, "\x1b\\[[0-9;]*31mfail", coloured) // fail in red
	require.Regexp(t, "\x1b\\[[0-9;]*33mwarn", coloured) // warn in yellow
}

func TestUpdate_ResizeReflowsTheView(t *testing.T) {
	t.Parallel()
	m := model(t, 120, 30, 2, asciiRenderer())
	var tm tea.Model = m
	tm, _ = tm.Update(tea.WindowSizeMsg{Width: 50, Height: 10})
	v := tm.(Model).View()
	for _, l := range strings.Split(v, "\n") {
		require.LessOrEqual(t, lipgloss.Width(l), 50)
	}
	require.LessOrEqual(t, strings.Count(v, "\n")+1, 10)
	require.Contains(t, v, "q quit") // the footer survives a small screen
}

func TestUpdate_OneRunAtATime_StaleTicksDropped(t *testing.T) {
	t.Parallel()
	m := model(t, 80, 24, 1, asciiRenderer())
	gen := m.gen

	// A tick from before the last run is stale.
	var tm tea.Model = m
	tm, cmd := tm.Update(tickMsg{gen: gen - 1})
	require.Nil(t, cmd)
	require.False(t, tm.(Model).running)

	// The current tick starts a run; a second one, or r, while it runs does not.
	tm, cmd = tm.Update(tickMsg{gen: gen})
	require.NotNil(t, cmd)
	require.True(t, tm.(Model).running)
	tm, cmd = tm.Update(tickMsg{gen: tm.(Model).gen})
	require.Nil(t, cmd)
	tm, cmd = tm.Update(keyMsg("r"))
	require.Nil(t, cmd)

	// Changing the interval mid-run schedules nothing (the run will).
	tm, cmd = tm.Update(keyMsg("+"))
	require.Nil(t, cmd)
	require.Equal(t, 20*time.Second, tm.(Model).Interval())
}

func TestUpdate_IntervalIsClamped(t *testing.T) {
	t.Parallel()
	m := model(t, 80, 24, 1, asciiRenderer())
	m = press(m, "-", "-", "-", "-", "-", "-")
	require.Equal(t, MinInterval, m.Interval())
	m = press(m, strings.Split(strings.Repeat("+", 20), "")...)
	require.Equal(t, MaxInterval, m.Interval())
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	require.Equal(t, "▁▁▁", Sparkline([]float64{0, 0, 0}, 10))
	require.Equal(t, "▁▅█", Sparkline([]float64{0, 5, 10}, 10))
	require.Equal(t, "▅█", Sparkline([]float64{0, 5, 10}, 2)) // newest kept
	require.Empty(t, Sparkline(nil, 5))
}

// TestProgram_NavigateOpenRerunQuit drives the real bubbletea program:
// the first run arrives, the operator moves to the lake check, opens it,
// re-runs now, sees the second run, goes back and quits.
func TestProgram_NavigateOpenRerunQuit(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	run := func(context.Context) doctor.Report {
		n := int(calls.Add(1))
		return fixture(n)
	}
	m := New(context.Background(), run, time.Minute, WithRenderer(asciiRenderer()),
		WithClock(func() time.Time { return t0.Add(time.Minute) }))
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	waitFor := func(what string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(30*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
	}
	waitFor("run 1,")
	tm.Send(keyMsg("down"))
	tm.Send(keyMsg("enter"))
	waitFor("runbook: docs/runbooks/lake.md")
	tm.Send(keyMsg("r"))
	waitFor("run 2,")
	tm.Send(keyMsg("esc"))
	tm.Send(keyMsg("j"))
	waitFor("▸ ok")
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))

	final := tm.FinalModel(t).(Model)
	require.Equal(t, 2, final.Runs())
	require.EqualValues(t, 2, calls.Load())
	require.False(t, final.InDetail())
	require.Equal(t, 2, final.Cursor()) // database → lake → lease
}

func TestUpdate_KeysReadTogetherAreEachHandled(t *testing.T) {
	t.Parallel()
	m := model(t, 80, 24, 1, asciiRenderer())
	tm, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjq")})
	require.Equal(t, 2, tm.(Model).Cursor())
	require.NotNil(t, cmd)
	// j and j return no command, so the batch is q's tea.Quit itself.
	_, quit := cmd().(tea.QuitMsg)
	require.True(t, quit, "the q in the run must quit")
}

// The live view shows a failed continuity check like any other: its id,
// its status and the start of its summary, with nothing special-cased.
func TestView_ContinuityFailureShows(t *testing.T) {
	t.Parallel()
	rep := fixture(1)
	cont := doctor.Result{ID: doctor.IDContinuity, Title: "lake and database share their history", Status: doctor.StatusFail,
		Summary: "the lake is ahead of the database (outbox row 2401, recorded by the lake, is not in the database): lake at seq 2401 (timeline 1), database outbox at seq 1990 (timeline 2); both agree up to seq 1958",
		Details: []string{}, Data: map[string]any{"state": "lake-ahead"}, Runbook: doctor.Runbook(doctor.IDContinuity), CheckedAt: t0}
	rep.Checks = append([]doctor.Result{rep.Checks[0], cont}, rep.Checks[1:]...)
	rep.Counts[doctor.StatusFail]++
	m := New(context.Background(), func(context.Context) doctor.Report { return rep }, 10*time.Second,
		WithClock(func() time.Time { return t0.Add(13 * time.Second) }), WithRenderer(asciiRenderer()))
	var tm tea.Model = m
	tm, _ = tm.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	tm, _ = tm.Update(reportMsg{rep: rep, at: t0.Add(13 * time.Second)})
	view := tm.View()
	require.Contains(t, view, "continuity")
	require.Contains(t, view, "the lake is ahead of the database")
	line := ""
	for _, l := range strings.Split(view, "\n") {
		if strings.Contains(l, "continuity") {
			line = l
		}
	}
	require.Contains(t, strings.ToLower(line), "fail")
}

// fixtureDBDown is the report of a run with the database unreachable: the
// database check fails, the checks that need it are skipped, and the lake
// checks still run (the Delta check degraded to what the lake shows).
func fixtureDBDown(run int) doctor.Report {
	rep := fixture(run)
	why := "skipped: needs the database, and the database check failed (see its row)"
	for i, c := range rep.Checks {
		switch c.ID {
		case doctor.IDDatabase:
			rep.Checks[i].Status, rep.Checks[i].Summary = doctor.StatusFail, "cannot connect to the database: connection refused"
			rep.Checks[i].Data = map[string]any{}
		case doctor.IDLake, doctor.IDDelta, doctor.IDReconcile:
		default:
			rep.Checks[i].Status, rep.Checks[i].Summary, rep.Checks[i].Details = doctor.StatusSkipped, why, nil
			rep.Checks[i].Data = map[string]any{}
		}
	}
	rep.Counts = map[doctor.Status]int{}
	for _, c := range rep.Checks {
		rep.Counts[c.Status]++
	}
	return rep
}

// With the database down the lag is unknown: the sparkline leaves a gap
// and says "now unknown", never "now 0s"; when it comes back the graph
// resumes.
func TestView_DatabaseDown_LagUnknownNotZero(t *testing.T) {
	t.Parallel()
	clock := func() time.Time { return t0.Add(time.Minute) }
	m := New(context.Background(), func(context.Context) doctor.Report { return fixture(0) }, 10*time.Second,
		WithClock(clock), WithRenderer(asciiRenderer()))
	var tm tea.Model = m
	tm, _ = tm.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	for i := 1; i <= 3; i++ {
		tm, _ = tm.Update(reportMsg{rep: fixture(i), at: clock()})
	}
	tm, _ = tm.Update(reportMsg{rep: fixtureDBDown(4), at: clock()})
	tm, _ = tm.Update(reportMsg{rep: fixtureDBDown(5), at: clock()})
	v := tm.(Model).View()
	for i, l := range strings.Split(v, "\n") {
		require.LessOrEqualf(t, lipgloss.Width(l), 80, "line %d is wider than the terminal: %q", i, l)
	}
	require.Contains(t, v, "now unknown (lag check skipped)")
	require.NotContains(t, v, "now 0s")
	require.Contains(t, v, "▂▄█  ", "the two unknown runs are gaps after the known ones")
	golden.RequireEqual(t, []byte(v))

	tm, _ = tm.Update(reportMsg{rep: fixture(6), at: clock()})
	v = tm.(Model).View()
	require.Contains(t, v, "now 54s")
	require.NotContains(t, v, "unknown")
}

func TestSparkline_UnknownIsAGap(t *testing.T) {
	t.Parallel()
	require.Equal(t, "▁ █", Sparkline([]float64{0, math.NaN(), 10}, 10))
	require.Equal(t, "  ", Sparkline([]float64{math.NaN(), math.NaN()}, 10))
}

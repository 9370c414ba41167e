package doctorcmd

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/doctor/tui"
)

// watch runs the live UI until the operator quits or ctx ends (SIGINT,
// SIGTERM). The exit status is always 0 unless the UI itself fails: a live
// view is for looking, not for scripting.
func watch(ctx context.Context, o *Options, runChecks func(context.Context) doctor.Report) error {
	// Quitting cancels a run still in flight, so the pool closes at once
	// instead of waiting for its checks.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := tui.New(runCtx, runChecks, o.Interval)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx),
		tea.WithInput(o.IO.In), tea.WithOutput(o.IO.Out))
	_, err := p.Run()
	cancel()
	if err != nil && ctx.Err() == nil { // a signal ending the UI is not an error
		return fmt.Errorf("the doctor UI stopped: %w", err)
	}
	return nil
}

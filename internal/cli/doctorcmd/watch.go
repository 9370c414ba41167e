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
	f := o.Factory
	m := tui.New(ctx, runChecks, o.Interval)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx),
		tea.WithInput(f.IO.In), tea.WithOutput(f.IO.Out))
	if _, err := p.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the doctor UI stopped: %w", err)
	}
	return nil
}

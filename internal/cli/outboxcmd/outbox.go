// Package outboxcmd is `oml outbox prune`: delete the outbox rows every
// lake table has applied, older than the retention (internal/outboxprune
// decides and internal/outbox deletes; docs/outbox.md is the page).
package outboxcmd

import (
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
)

// NewCmd builds `oml outbox`.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Keep oml.outbox from growing for ever",
		Long: `oml.outbox holds one row per lake operation the journal implies. Once every
table a row targets has applied it, the row is needed by nothing (the journal
re-derives it when a table must be rebuilt), and oml outbox prune deletes it.
See docs/outbox.md.`,
	}
	cmd.AddCommand(NewCmdPrune(f, nil))
	return cmd
}

package cli

import (
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cli/chaincmd"
	"github.com/omlhq/oml/internal/cli/deadlettercmd"
	"github.com/omlhq/oml/internal/cli/devcmd"
	"github.com/omlhq/oml/internal/cli/doctorcmd"
	"github.com/omlhq/oml/internal/cli/initcmd"
	"github.com/omlhq/oml/internal/cli/keycmd"
	"github.com/omlhq/oml/internal/cli/lakecmd"
	"github.com/omlhq/oml/internal/cli/migratecmd"
	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cli/reconcilecmd"
	"github.com/omlhq/oml/internal/cli/statuscmd"
	"github.com/omlhq/oml/internal/cli/tenantcmd"
	"github.com/omlhq/oml/internal/cliutil"
)

// commands lists the top-level nouns. Each package owns its subtree; add one
// line here per noun.
func commands(f *cliutil.Factory) []*cobra.Command {
	return []*cobra.Command{
		chaincmd.NewCmd(f),
		deadlettercmd.NewCmd(f),
		devcmd.NewCmd(f),
		doctorcmd.NewCmd(f, nil),
		lakecmd.NewCmd(f),
		migratecmd.NewCmd(f, nil),
		initcmd.NewCmd(f, nil),
		outboxcmd.NewCmd(f),
		keycmd.NewCmd(f),
		tenantcmd.NewCmd(f),
		reconcilecmd.NewCmd(f, nil),
		statuscmd.NewCmd(f, nil),
	}
}

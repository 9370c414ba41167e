package reconcilecmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/reconcile"
)

// A lake row's artifact id is whatever the lake file says: reconcile's
// table prints it (and the detail) escaped.
func TestPrintTable_EscapesTerminalSequencesFromTheLake(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{false, true} {
		io, _, out, _ := iostreams.Test()
		io.SetStdoutTTY(tty)
		rep := &reconcile.Report{Findings: []reconcile.Finding{{
			Class: reconcile.Classes[0], TenantName: "acme", Table: "silver.claims",
			ArtifactID: "x\x1b]8;;http://evil\x07click\x1b]8;;\x07", Version: 2, Detail: "lake says \x1b[2Jhi",
		}}}
		require.NoError(t, printTable(io, rep))
		require.NotContains(t, out.String(), "\x1b", "tty=%v", tty)
		require.True(t, strings.Contains(out.String(), `x\x1b]8;;http://evil\x07click`), out.String())
	}
}

// Package cli builds oml's cobra command tree and runs it. Main is the whole
// program: it parses flags, runs one command, prints any error as one line on
// stderr and returns the exit code chosen by cliutil.ExitCodeFor.
//
// Each noun lives in its own package under internal/cli (tenantcmd, devcmd,
// lakecmd, ...), exposing NewCmd(f *cliutil.Factory) *cobra.Command.
package cli

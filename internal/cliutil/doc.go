// Package cliutil is the shared plumbing of every oml command: the Factory
// that resolves global flags and environment (flags win) and hands out lazy
// dependencies (database pool, lake URL, signing key), the typed errors that
// decide the exit code, and the one way to write table or JSON output.
//
// Commands never call os.Exit and never print errors themselves; they return
// an error and cli.Main maps it to an exit code in one place (see ExitCodeFor).
package cliutil

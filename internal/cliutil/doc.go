// Package cliutil is the shared plumbing of every oml command: the Factory
// that resolves global flags and environment (flags win) and hands out lazy
// dependencies (DB and CurrentDB: the pool, and the one schema check;
// Lake and OptionalLake: the lake root, opened one way; SigningKey and
// Signer: the deployment key), the typed errors that decide the exit code,
// and the one way to write table or JSON output.
//
// A failed open is not remembered, so a long-lived command (doctor
// --watch) gets a database or lake that was down once it is back, and the
// one that is up is reused.
//
// Commands never call os.Exit and never print errors themselves; they return
// an error and cli.Main maps it to an exit code in one place (see ExitCodeFor).
package cliutil

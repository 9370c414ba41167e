// Package docstest keeps the operator documentation true to the code.
//
// Its tests run every fenced ```sh block of README.md and docs/**/*.md
// against a throwaway deployment (a real PostgreSQL from internal/testdb, a
// file:// lake in a temporary directory, or the S3 test server, and the real
// oml binary built once and first on PATH), checking each command's exit
// status and, where the page shows output in a ```console block right after
// the example, that the shown lines appear. They also check that
// docs/reference/ is what the cobra command tree generates today, and that no
// hand-written page names a flag a command no longer has.
//
// The non-test code is the part a page's conventions live in: the parser of
// the markers and blocks and the refusal of commands that would act on the
// host (parse.go), the output matcher (match.go), the scan of `oml VERB
// --flag` mentions (flags.go), and the generator of the command reference
// (reference.go; gendocs runs it for `make docs`).
// docs/testing.md ("Documentation examples are tested") is the authors'
// side of the same conventions.
package docstest

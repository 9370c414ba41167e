// Package e2e drives the whole oml command line (cli.Run, in process) against
// a real throwaway PostgreSQL and a real lake: the operator's flows from key
// generation to a drained, verified lake, and the exit codes and one-line
// errors the brief promises. It has no non-test code.
package e2e

package cliutil

import (
	"errors"
	"fmt"
)

// ExitCode is the process exit status, as fixed by the brief.
type ExitCode int

const (
	// ExitOK means all good.
	ExitOK ExitCode = 0
	// ExitFindings means the command ran and found a problem (a broken chain,
	// a failing doctor check, reconcile findings, dead letters when asked).
	ExitFindings ExitCode = 1
	// ExitUsage means a usage, configuration or connection error.
	ExitUsage ExitCode = 2
)

// FlagError is a usage error: a bad flag, a missing argument, a bad combination.
type FlagError struct{ err error }

func (e *FlagError) Error() string { return e.err.Error() }
func (e *FlagError) Unwrap() error { return e.err }

// FlagErrorf builds a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{err: fmt.Errorf(format, args...)}
}

// ConfigError is a configuration or connection problem: a missing or
// malformed key file, an unreachable database, a bad lake URL. Its message
// must be one sentence naming what was wrong and what to do.
type ConfigError struct{ err error }

func (e *ConfigError) Error() string { return e.err.Error() }
func (e *ConfigError) Unwrap() error { return e.err }

// ConfigErrorf builds a ConfigError.
func ConfigErrorf(format string, args ...any) error {
	return &ConfigError{err: fmt.Errorf(format, args...)}
}

// AsConfigError marks err as a configuration/connection error (exit 2).
func AsConfigError(err error) error {
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		return err
	}
	return &ConfigError{err: err}
}

// FindingsError means the command ran and found problems; the findings were
// already reported on stdout, and Msg (if any) is a one-line summary for stderr.
type FindingsError struct{ Msg string }

func (e *FindingsError) Error() string {
	if e.Msg == "" {
		return "problems found"
	}
	return e.Msg
}

// ErrFindings is a FindingsError with no extra message.
var ErrFindings = &FindingsError{}

// Findingsf builds a FindingsError with a summary line.
func Findingsf(format string, args ...any) error {
	return &FindingsError{Msg: fmt.Sprintf(format, args...)}
}

// ErrSilent exits with ExitFindings without printing anything more.
var ErrSilent = errors.New("silent")

// ExitCodeFor maps an error returned by a command to the process exit code.
// It is the only place that decides exit codes.
func ExitCodeFor(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var fe *FindingsError
	if errors.As(err, &fe) || errors.Is(err, ErrSilent) {
		return ExitFindings
	}
	// Usage, configuration, connection and every unexpected error: 2. An
	// error we did not classify is still "oml could not do its job", never
	// "the job found a problem".
	return ExitUsage
}

// Package runtest is what the run-function table tests of the command
// packages share (cli/cli's Test_xRun shape): streams with the terminal
// set on or off, a fixed -o value, and a way to compare the flags a
// command parsed while ignoring the function fields its Options carry. It
// needs no database: the run functions are driven with fakes for those
// functions (the engines keep their real-server tests).
package runtest

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
)

// Streams are test streams whose stdout, stderr and stdin are a terminal
// when tty is set.
type Streams struct {
	IO              *iostreams.IOStreams
	In, Out, ErrOut *bytes.Buffer
}

// IO returns buffers behind streams that are all a terminal or none.
func IO(tty bool) Streams {
	io, in, out, errOut := iostreams.Test()
	io.SetStdoutTTY(tty)
	io.SetStderrTTY(tty)
	io.SetStdinTTY(tty)
	return Streams{IO: io, In: in, Out: out, ErrOut: errOut}
}

// Format is an Options.Format that returns JSON when json is set, else
// table.
func Format(json bool) func() (cliutil.Format, error) {
	return func() (cliutil.Format, error) {
		if json {
			return cliutil.FormatJSON, nil
		}
		return cliutil.FormatTable, nil
	}
}

// Flags is opts (a struct) with its dependency fields — every func field
// and the *iostreams.IOStreams — zeroed, so a flag-parsing test can
// require.Equal the Options a runF received against the flags it expects
// (func values never compare equal).
func Flags[T any](opts T) T {
	v := reflect.ValueOf(&opts).Elem()
	ioType := reflect.TypeOf((*iostreams.IOStreams)(nil))
	for i := range v.NumField() {
		fv := v.Field(i)
		if !fv.CanSet() {
			continue
		}
		if fv.Kind() == reflect.Func || fv.Type() == ioType {
			fv.Set(reflect.Zero(fv.Type()))
		}
	}
	return opts
}

// RequireOutput pins what a run function did: its exit (cliutil.ExitOK
// for a nil err), its stderr exactly, and its stdout against the test's
// golden file (testdata/<TestName>/<case>.golden; -update rewrites it).
func RequireOutput(t *testing.T, s Streams, err error, code cliutil.ExitCode, stderr string) {
	t.Helper()
	require.Equal(t, code, cliutil.ExitCodeFor(err), "%v", err)
	require.Equal(t, stderr, s.ErrOut.String())
	golden.RequireEqual(t, s.Out.Bytes())
}

// RequireStreams is RequireOutput for a command that writes a plan or
// notes on stderr as well: its exit, and stdout, a "--- stderr" line and
// stderr together against the golden file.
func RequireStreams(t *testing.T, s Streams, err error, code cliutil.ExitCode) {
	t.Helper()
	require.Equal(t, code, cliutil.ExitCodeFor(err), "%v", err)
	both := append(append(s.Out.Bytes(), "--- stderr\n"...), s.ErrOut.Bytes()...)
	golden.RequireEqual(t, both)
}

// Fixed values for fakes, so golden files do not change from run to run.
var (
	// At is the time fakes report.
	At = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Acme and Initech are two tenants' ids.
	Acme    = uuid.MustParse("0b5c9a52-4f5e-4c0e-8a55-1b2f3c4d5e6f")
	Initech = uuid.MustParse("f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b")
)

// Ptr is a pointer to v, for the optional fields of fakes.
func Ptr[T any](v T) *T { return &v }

// Parse builds a command with newCmd over a Factory on io, runs it on args
// (split on spaces) with a runF that only keeps the Options it is given,
// and returns them (nil when parsing failed), the Factory and the error:
// what a flag-parsing test of any command needs.
func Parse[O any](io *iostreams.IOStreams, args string, newCmd func(*cliutil.Factory, func(context.Context, *O) error) *cobra.Command) (*O, *cliutil.Factory, error) {
	f := cliutil.New(io)
	var got *O
	cmd := newCmd(f, func(_ context.Context, o *O) error { got = o; return nil })
	cmd.SetArgs(strings.Fields(args))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return got, f, cmd.Execute()
}

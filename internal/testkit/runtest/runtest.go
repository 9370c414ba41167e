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

// FlagCase is one row of a flag-parsing table: a command line, whether
// stdin is a terminal, and what parsing it must give — an error naming
// WantErr (a usage error: exit 2), or Options whose flags equal Want (the
// dependency fields ignored, see Flags). Check, when set, replaces the Want
// comparison for a row that pins only some fields.
type FlagCase[O any] struct {
	Name     string // the subtest's name; Args when empty
	Args     string
	StdinTTY bool
	WantErr  string
	Want     O
	Check    func(t *testing.T, o *O)
}

// RunFlagCases runs each case as a parallel subtest through Parse. A case
// that parses must hand the run function the Factory's streams (every
// Options carries them as IO) and the flags it expects.
func RunFlagCases[O any](t *testing.T, newCmd func(*cliutil.Factory, func(context.Context, *O) error) *cobra.Command, cases []FlagCase[O]) {
	t.Helper()
	for _, tc := range cases {
		name := tc.Name
		if name == "" {
			name = tc.Args
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			io, _, _, _ := iostreams.Test()
			io.SetStdinTTY(tc.StdinTTY)
			got, f, err := Parse(io, tc.Args, newCmd)
			if tc.WantErr != "" {
				require.ErrorContains(t, err, tc.WantErr)
				require.Equal(t, cliutil.ExitUsage, cliutil.ExitCodeFor(err))
				return
			}
			require.NoError(t, err)
			require.Same(t, f.IO, reflect.ValueOf(got).Elem().FieldByName("IO").Interface())
			if tc.Check != nil {
				tc.Check(t, got)
				return
			}
			require.Equal(t, tc.Want, Flags(*got))
		})
	}
}

// Package iostreams owns the process's standard streams and what is known
// about them (is stdout a terminal, how wide is it), so commands never touch
// os.Stdout directly and tests can swap in buffers.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"golang.org/x/term"
)

// IOStreams bundles the three standard streams with terminal facts.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdoutTTY bool
	stderrTTY bool
	stdinTTY  bool
	width     int
}

// System returns the process's real streams.
func System() *IOStreams {
	s := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	s.stdoutTTY = isTerminal(os.Stdout)
	s.stderrTTY = isTerminal(os.Stderr)
	s.stdinTTY = isTerminal(os.Stdin)
	if s.stdoutTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
			s.width = w
		}
	}
	return s
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Test returns streams backed by buffers; no stream is a terminal unless the
// test says so with SetStdoutTTY and friends.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, width: 100}, in, out, errOut
}

// IsStdoutTTY reports whether stdout is a terminal (tables, colour, progress bars).
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether stderr is a terminal (progress bars go there).
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// IsStdinTTY reports whether stdin is a terminal (confirmation prompts).
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// SetStdoutTTY overrides terminal detection for stdout (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// SetStderrTTY overrides terminal detection for stderr (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// SetStdinTTY overrides terminal detection for stdin (tests).
func (s *IOStreams) SetStdinTTY(v bool) { s.stdinTTY = v }

// TerminalWidth is the width of stdout when it is a terminal, else 80.
func (s *IOStreams) TerminalWidth() int {
	if s.width > 0 {
		return s.width
	}
	return 80
}

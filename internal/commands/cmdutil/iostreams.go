package cmdutil

import (
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// IOStreams are the process's standard streams. Commands write data to Out
// and diagnostics to ErrOut and never touch os.Stdout or os.Stderr directly,
// so tests capture everything a command prints.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY bool
	errTTY bool
}

// System returns the process's own streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		outTTY: isatty.IsTerminal(os.Stdout.Fd()),
		errTTY: isatty.IsTerminal(os.Stderr.Fd()),
	}
}

// Test returns streams backed by buffers, as if piped.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY reports whether stderr is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY overrides terminal detection (tests).
func (s *IOStreams) SetTTY(out, err bool) { s.outTTY, s.errTTY = out, err }

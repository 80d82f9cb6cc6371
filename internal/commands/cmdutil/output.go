package cmdutil

import (
	"github.com/walctl/walctl/internal/commands/progress"
	"github.com/walctl/walctl/internal/commands/render"
)

// Print writes a command's result to stdout: v as JSON with --output json,
// otherwise the table built by rows — a lipgloss table on a terminal, plain
// aligned text when piped.
func (f *Factory) Print(v any, rows func() *render.Table) error {
	out := f.IOStreams.Out
	if f.JSON() {
		return render.JSON(out, v)
	}
	t := rows()
	if f.IOStreams.IsStdoutTTY() {
		return render.Pretty(out, t)
	}
	return render.Plain(out, t)
}

// Progress returns a reporter on stderr: a live line on a terminal, only the
// summary when piped, nothing with --output json.
func (f *Factory) Progress() *progress.Reporter {
	return progress.New(f.IOStreams.ErrOut, f.IOStreams.IsStderrTTY(), f.JSON(), f.Now)
}

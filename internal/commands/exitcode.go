package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/errs"
)

// Exit codes. They are part of walctl's interface: scripts and runbooks
// branch on them, so a code never changes meaning.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitConflict    = 4
	ExitUnavailable = 5
	ExitCorrupt     = 6
	ExitInterrupted = 130
)

// exitCodeHelp is listed in `walctl --help` and in the man page.
const exitCodeHelp = `EXIT STATUS
  0    success
  1    failure not covered below
  2    usage error or invalid input (bad flag, argument, name, schema, config); nothing was written
  3    not found (unknown table, claim, version)
  4    conflict or fenced (another holder owns the table, a newer epoch, a lost race)
  5    a dependency is unavailable (etcd, WAL server, Kubernetes) within --command-timeout
  6    data integrity error (checksum mismatch, corrupt or truncated file); nothing was repaired
  10   catchup submit: the master refused the admission (not with --dry-run)
  11   catchup run: catch-up admission is closed (cancelled or stalled); nothing more was committed
  12   catchup run: another Job or a newer execution holds the admission; nothing more was committed
  130  interrupted (SIGINT or SIGTERM)`

// ExitCode maps an error to walctl's exit code. It is the only place that
// does so.
func ExitCode(err error, interrupted bool) int {
	var exit *cmdutil.ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		return exit.Code
	case interrupted && errors.Is(err, context.Canceled):
		return ExitInterrupted
	case cmdutil.IsFlagError(err), errors.Is(err, errs.ErrInvalid):
		return ExitUsage
	case errors.Is(err, errs.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrFenced):
		return ExitConflict
	case errors.Is(err, errs.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return ExitUnavailable
	case errors.Is(err, errs.ErrCorrupt):
		return ExitCorrupt
	case interrupted:
		return ExitInterrupted
	}
	return ExitFailure
}

// jsonOutput reports whether this invocation asked for --output json. When
// the configuration could not be loaded (the error being reported may be
// that), the arguments and WALCTL_OUTPUT are looked at directly.
func jsonOutput(f *cmdutil.Factory, args []string) bool {
	if f.Config != nil {
		return f.JSON()
	}
	out := os.Getenv("WALCTL_OUTPUT")
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--output="); ok {
			out = v
		} else if a == "--output" && i+1 < len(args) {
			out = args[i+1]
		}
	}
	return out == "json"
}

// JSONError is the shape of an error on stderr under --output json: code is
// the exit code, message the error's text. Stdout stays data-only.
type JSONError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func printJSONError(w io.Writer, code int, err error) {
	var e JSONError
	e.Error.Code, e.Error.Message = code, err.Error()
	b, _ := json.Marshal(e)
	fmt.Fprintf(w, "%s\n", b)
}

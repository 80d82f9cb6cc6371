package cmdutil

import (
	"errors"
	"fmt"
)

// FlagError is a usage error: a bad flag, argument or setting. The command
// layer prints the usage for it and exits with code 2.
type FlagError struct{ err error }

func (e *FlagError) Error() string { return e.err.Error() }
func (e *FlagError) Unwrap() error { return e.err }

// FlagErrorf returns a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{err: fmt.Errorf(format, args...)}
}

// FlagErrorWrap turns err into a FlagError.
func FlagErrorWrap(err error) error { return &FlagError{err: err} }

// IsFlagError reports whether err is a usage error.
func IsFlagError(err error) bool {
	var fe *FlagError
	return errors.As(err, &fe)
}

// SilentError tells the command layer to exit with code without printing
// anything more: the command has already reported the failure.
type SilentError struct {
	Err error
}

func (e *SilentError) Error() string { return e.Err.Error() }
func (e *SilentError) Unwrap() error { return e.Err }

// Catch-up exit codes: the outcomes of `catchup run` and `catchup submit`
// that scripts and runners branch on, beyond the category codes.
const (
	ExitAdmissionRefused = 10 // catchup submit: the master refused (not a dry run)
	ExitAdmissionClosed  = 11 // catchup run: admission closed (cancelled or stalled)
	ExitWrongExecution   = 12 // catchup run: another Job or a newer execution is admitted
)

// ExitError carries an explicit exit code for an outcome that is not an
// error category (ExitAdmissionRefused, …). Err is printed as usual.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

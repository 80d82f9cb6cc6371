package cmdutil

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/walctl/walctl/internal/core/errs"
)

// ByteSize is a flag value for a size such as 64MiB, 1GB or 1048576, stored
// in *V:
//
//	cmd.Flags().Var(&cmdutil.ByteSize{V: &opts.Size}, "size", "…")
type ByteSize struct{ V *int64 }

func (b *ByteSize) String() string {
	if b.V == nil || *b.V == 0 {
		return "0"
	}
	return humanize.IBytes(uint64(*b.V))
}

// Type names the value in help.
func (b *ByteSize) Type() string { return "size" }

// Set parses s; a malformed size is errs.ErrInvalid (exit 2).
func (b *ByteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("%q is not a size (e.g. 64MiB): %w", s, errs.ErrInvalid)
	}
	*b.V = int64(n)
	return nil
}

package cmdutil

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/walctl/walctl/internal/core/errs"
)

// CPUProfile starts a CPU profile of this process into path; stop writes
// it out (`go tool pprof path` reads it).
func CPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w: %w", errs.ErrInvalid, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

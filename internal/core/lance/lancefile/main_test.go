package lancefile

import (
	"flag"
	"os"
	"testing"
)

// TestMain bounds the fuzzer's minimization of a new input to
// minimizeExecs attempts unless -test.fuzzminimizetime is given. Go's
// default is 60 s per new input, and a data file does not shrink: its
// footer sits at the end and every offset shifts when a byte is removed,
// so the minimizer's quadratic "remove each subset" pass over a 25 KB
// seed runs out the whole minute each time. `go test -fuzz FuzzDataFile
// -fuzztime 60s` then showed ~9 execs and nothing after: no decoder hung.
func TestMain(m *testing.M) {
	if f := flag.Lookup("test.fuzzminimizetime"); f != nil {
		if err := f.Value.Set(minimizeExecs); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

const minimizeExecs = "2000x"

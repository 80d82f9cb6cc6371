package publish

import (
	"os"
	"testing"

	"github.com/walctl/walctl/internal/core/wal"
)

// Publication reads the WAL into recycled buffers: every test of the
// package runs with them poisoned as they return, so a use of an entry
// after its last release shows up as damaged rows.
func TestMain(m *testing.M) {
	wal.SetPoisonRecycled(true)
	os.Exit(m.Run())
}

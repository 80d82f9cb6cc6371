package catchup_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/etcdembed"
	"github.com/walctl/walctl/internal/core/wal"
)

// One real embedded etcd serves the package; each test works under a key
// prefix of its own.
var srv *etcdembed.Server

func TestMain(m *testing.M) {
	wal.SetPoisonRecycled(true) // a use of a WAL entry after its release reads garbage
	dir, err := os.MkdirTemp("", "catchup-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err = etcdembed.Start(ctx, etcdembed.Options{Dir: dir})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/walctl/walctl/internal/testutil/walctlbin"
)

// walctlBin is the walctl binary built once by TestMain.
var walctlBin string

func TestMain(m *testing.M) { walctlbin.Main(m, &walctlBin) }

// EnvEtcd overrides where the etcd binary is (default <module>/bin/etcd,
// built by `make etcd`).
const EnvEtcd = "WALCTL_CHAOS_ETCD"

// etcdBin finds the etcd binary or fails the test saying how to build it.
func etcdBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvEtcd); p != "" {
		return p
	}
	root, err := walctlbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", "etcd")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no etcd binary at %s: build it with `make etcd` (or set %s): %v", p, EnvEtcd, err)
	}
	return p
}

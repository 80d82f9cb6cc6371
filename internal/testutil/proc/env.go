// Package proc runs real processes for walctl's integration and fault
// tests: start in an isolated environment, SIGKILL, SIGSTOP, SIGCONT,
// SIGTERM, wait with captured output, and readiness waits that watch files
// and ports instead of sleeping. It is the one process harness of the tree;
// every suite that runs walctl (or etcd) as a process uses it.
package proc

import (
	"os"
	"path/filepath"
	"strings"
)

// IsolatedEnv is the test process's environment without anything that
// could make a child read a developer's configuration: every WALCTL_
// setting, HOME and XDG_* are dropped, and HOME, the XDG base directories
// and walctl's data dir point under dir instead. extra (NAME=value) is
// appended last, so it overrides these defaults (exec keeps the last of
// duplicate keys). WAL read buffers are poisoned as they are recycled
// (WALCTL_WAL_POISON_RECYCLED), so a use after release shows up as
// damaged records.
func IsolatedEnv(dir string, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WALCTL_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out,
		"HOME="+filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "xdg", "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "xdg", "data"),
		"XDG_STATE_HOME="+filepath.Join(dir, "xdg", "state"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "xdg", "cache"),
		"WALCTL_DATA_DIR="+filepath.Join(dir, "data"),
		"WALCTL_WAL_POISON_RECYCLED=1",
	)
	return append(out, extra...)
}

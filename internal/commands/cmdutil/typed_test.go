package cmdutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/core/errs"
)

func load(t *testing.T, yaml string, args ...string) (*Config, error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	AddSettingFlags(cmd.Flags(), KeyConfig, KeyMemoryBudget, KeyWALMaxGenerationAge, KeyWorkerTables)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(append([]string{"--config", path}, args...)); err != nil {
		return nil, err
	}
	return LoadConfig(cmd)
}

// Sizes accept 64MiB from the file, the environment and flags alike; a
// value that does not parse names the key, its source and the value.
func TestTypedSettings(t *testing.T) {
	c, err := load(t, "worker:\n  memory_budget: 64MiB\n  tables: [a, b]\nwal-generation-age: 2s\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Int64(KeyMemoryBudget) != 64<<20 || c.Duration(KeyWALMaxGenerationAge) != 2*time.Second ||
		strings.Join(c.StringSlice(KeyWorkerTables), ",") != "a,b" {
		t.Fatalf("budget %d age %s tables %v", c.Int64(KeyMemoryBudget), c.Duration(KeyWALMaxGenerationAge), c.StringSlice(KeyWorkerTables))
	}
	c, err = load(t, "worker:\n  memory_budget: 1048576\n", "--memory-budget", "2GiB")
	if err != nil || c.Int64(KeyMemoryBudget) != 2<<30 || c.Source(KeyMemoryBudget) != SourceFlag {
		t.Fatalf("flag: %v %d", err, c.Int64(KeyMemoryBudget))
	}
	t.Setenv("WALCTL_WORKER_MEMORY_BUDGET", "3MiB")
	if c, err = load(t, ""); err != nil || c.Int64(KeyMemoryBudget) != 3<<20 {
		t.Fatalf("env: %v", err)
	}
	t.Setenv("WALCTL_WORKER_MEMORY_BUDGET", "")

	for _, tc := range []struct{ yaml, env, want string }{
		{"worker:\n  poll_interval: banana\n", "", `setting worker.poll_interval: invalid value "banana" from file `},
		{"worker:\n  memory_budget: lots\n", "", `setting worker.memory_budget: invalid value "lots" from file `},
		{"worker:\n  max_tables: two\n", "", `setting worker.max_tables: invalid value "two" from file `},
		{"embedded: maybe\n", "", `setting embedded: invalid value "maybe" from file `},
		{"", "5", `setting command-timeout: invalid value "5" from env WALCTL_COMMAND_TIMEOUT`},
	} {
		t.Setenv("WALCTL_COMMAND_TIMEOUT", tc.env)
		_, err := load(t, tc.yaml)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.yaml, tc.env, err, tc.want)
		}
	}
}

package cmdutil

import (
	"os"
	"path/filepath"
)

// defaultDataDir follows the XDG base directory convention, so that two
// commands typed in different working directories find the same WAL and etcd.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "walctl")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "share", "walctl")
	}
	return "walctl-data"
}

func defaultConfigFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "walctl", "config.yaml")
}

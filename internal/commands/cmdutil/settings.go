package cmdutil

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Setting is one configuration value walctl understands. Every setting can be
// given as a flag (global ones on the root command, others on the verbs that
// use them), as WALCTL_<KEY> in the environment (dots and dashes become
// underscores) and in the YAML config file under its key.
type Setting struct {
	Key     string // viper key, e.g. "etcd-endpoints" or "catchup.max_jobs"
	Flag    string // flag name on the root command; "" when the flag is a verb's own
	Default any
	Usage   string
	// Secret values (tokens) are shown redacted by `walctl config show`.
	Secret bool
}

// Env is the environment variable for the setting.
func (s Setting) Env() string {
	return "WALCTL_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(s.Key))
}

// Global settings, bound to persistent flags on the root command.
const (
	KeyConfig         = "config"
	KeyEtcdEndpoints  = "etcd-endpoints"
	KeyEtcdPrefix     = "etcd-prefix"
	KeyEmbedded       = "embedded"
	KeyDataDir        = "data-dir"
	KeyOutput         = "output"
	KeyLogLevel       = "log-level"
	KeyCommandTimeout = "command-timeout"
	KeyWAL            = "wal"
	KeyWALToken       = "wal-token"
	KeyLanceRoot      = "lance-root"
)

var registry = map[string]Setting{}

// Register adds settings to the registry. Packages of verbs register the
// settings they own from an init function, so `walctl config show` lists
// every setting with its effective value and source.
func Register(settings ...Setting) {
	for _, s := range settings {
		if _, dup := registry[s.Key]; dup {
			panic(fmt.Sprintf("setting %q registered twice", s.Key))
		}
		registry[s.Key] = s
	}
}

// Settings returns every registered setting, sorted by key.
func Settings() []Setting {
	out := make([]Setting, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// LookupSetting returns the registered setting for key.
func LookupSetting(key string) (Setting, bool) {
	s, ok := registry[key]
	return s, ok
}

func init() {
	Register(
		Setting{Key: KeyConfig, Flag: KeyConfig, Default: "", Usage: "config file (YAML; default $XDG_CONFIG_HOME/walctl/config.yaml when present)"},
		Setting{Key: KeyEtcdEndpoints, Flag: KeyEtcdEndpoints, Default: []string{}, Usage: "etcd endpoints, comma separated (none: the embedded etcd under the data dir)"},
		Setting{Key: KeyEtcdPrefix, Flag: KeyEtcdPrefix, Default: "/walctl/v1", Usage: "key prefix of walctl's records in etcd"},
		Setting{Key: KeyEmbedded, Flag: KeyEmbedded, Default: false, Usage: "use an in-process etcd on loopback under <data-dir>/etcd, even when endpoints are configured"},
		Setting{Key: KeyDataDir, Flag: KeyDataDir, Default: "", Usage: "directory for the local WAL, embedded etcd and tables (default $XDG_DATA_HOME/walctl or ~/.local/share/walctl)"},
		Setting{Key: KeyOutput, Flag: KeyOutput, Default: "table", Usage: "output format: table|json"},
		Setting{Key: KeyLogLevel, Flag: KeyLogLevel, Default: "info", Usage: "log level: debug|info|warn|error"},
		Setting{Key: KeyCommandTimeout, Flag: KeyCommandTimeout, Default: 30 * time.Second, Usage: "deadline for each call to a dependency (etcd, WAL, Kubernetes)"},
		Setting{Key: KeyWAL, Flag: KeyWAL, Default: "", Usage: "WAL server address host:port (none: the in-process WAL under <data-dir>/wal)"},
		Setting{Key: KeyWALToken, Flag: "", Secret: true, Default: "", Usage: "bearer token for the WAL server (env WALCTL_WAL_TOKEN or config file)"},
		Setting{Key: KeyLanceRoot, Flag: KeyLanceRoot, Default: "", Usage: "directory of Lance tables (default <data-dir>/tables)"},
	)
}

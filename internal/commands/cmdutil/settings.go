package cmdutil

import (
	"fmt"
	"sort"
	"strings"
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

package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/objstore"
)

// settingAnnotation marks a flag as the flag form of a registered setting.
const settingAnnotation = "walctl_setting"

// Sources of a configuration value, highest precedence first.
const (
	SourceFlag    = "flag"
	SourceEnv     = "env"
	SourceFile    = "file"
	SourceDefault = "default"
)

// Config is the loaded configuration of one invocation: flags > WALCTL_*
// environment > config file > defaults. It is the only holder of viper; the
// core receives typed values built from it.
type Config struct {
	v     *viper.Viper
	file  *viper.Viper // the config file alone, to tell where a value came from
	flags map[string]*pflag.Flag
	path  string
	// resolved holds values computed from others (the data dir's default,
	// the lance root under it, embedded when no endpoints are set).
	resolved map[string]any
	// values holds every setting parsed with its type (resolve).
	values map[string]any

	Global Global
}

// Global is the typed form of the global settings.
type Global struct {
	ConfigFile     string
	EtcdEndpoints  []string
	EtcdPrefix     string
	Embedded       bool
	DataDir        string
	Output         string
	LogLevel       string
	CommandTimeout time.Duration
	WAL            string
	WALToken       string
	// LanceRoot is the absolute directory of tables, or s3://bucket/prefix.
	LanceRoot string
	// LanceLocation is LanceRoot parsed.
	LanceLocation objstore.Root
}

// AddSettingFlags defines flags for the given registered settings on fs, with
// the setting's default and usage, and marks them so LoadConfig binds them.
func AddSettingFlags(fs *pflag.FlagSet, keys ...string) {
	for _, key := range keys {
		s, ok := LookupSetting(key)
		if !ok {
			panic(fmt.Sprintf("unknown setting %q", key))
		}
		name := s.Flag
		if name == "" {
			name = strings.NewReplacer(".", "-", "_", "-").Replace(key[strings.LastIndex(key, ".")+1:])
		}
		usage := s.Usage + " (env " + s.Env() + ")"
		switch d := s.Default.(type) {
		case string:
			fs.String(name, d, usage)
		case bool:
			fs.Bool(name, d, usage)
		case int:
			fs.Int(name, d, usage)
		case int64:
			v := d
			fs.Var(&ByteSize{V: &v}, name, usage)
		case float64:
			fs.Float64(name, d, usage)
		case time.Duration:
			fs.Duration(name, d, usage)
		case []string:
			fs.StringSlice(name, d, usage)
		default:
			panic(fmt.Sprintf("setting %q: unsupported default type %T", key, d))
		}
		_ = fs.SetAnnotation(name, settingAnnotation, []string{key})
	}
}

// LoadConfig resolves every registered setting for cmd.
func LoadConfig(cmd *cobra.Command) (*Config, error) {
	c := &Config{v: viper.New(), flags: map[string]*pflag.Flag{}}
	c.v.SetEnvPrefix("WALCTL")
	c.v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	c.v.AutomaticEnv()
	for _, s := range Settings() {
		c.v.SetDefault(s.Key, s.Default)
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if keys := f.Annotations[settingAnnotation]; len(keys) == 1 {
			c.flags[keys[0]] = f
			_ = c.v.BindPFlag(keys[0], f)
		}
	})

	path := c.v.GetString(KeyConfig)
	explicit := path != ""
	if !explicit {
		path = defaultConfigFile()
	}
	c.file = viper.New()
	if path != "" {
		if _, err := os.Stat(path); err == nil || explicit {
			if err := c.readFile(path); err != nil {
				return nil, err
			}
			c.path = path
		}
	}
	if err := c.resolve(); err != nil {
		return nil, err
	}
	if err := c.typed(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) readFile(path string) error {
	c.file.SetConfigFile(path)
	if filepath.Ext(path) == "" {
		c.file.SetConfigType("yaml")
	}
	if err := c.file.ReadInConfig(); err != nil {
		var notFound viper.ConfigFileNotFoundError
		if errors.As(err, &notFound) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("config file %s does not exist: %w", path, errs.ErrInvalid)
		}
		return fmt.Errorf("config file %s: %v: %w", path, err, errs.ErrInvalid)
	}
	var unknown []string
	for _, k := range c.file.AllKeys() {
		if _, ok := LookupSetting(k); !ok && !underMapSetting(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("config file %s: unknown key(s) %s (see `walctl config show` for the valid keys): %w",
			path, strings.Join(unknown, ", "), errs.ErrInvalid)
	}
	if err := c.v.MergeConfigMap(c.file.AllSettings()); err != nil {
		return fmt.Errorf("config file %s: %v: %w", path, err, errs.ErrInvalid)
	}
	return nil
}

// underMapSetting reports whether k lies inside a setting whose value is a map.
func underMapSetting(k string) bool {
	for i := strings.LastIndex(k, "."); i > 0; i = strings.LastIndex(k[:i], ".") {
		if s, ok := LookupSetting(k[:i]); ok {
			_, isMap := s.Default.(map[string]string)
			return isMap
		}
	}
	return false
}

func (c *Config) typed() error {
	g := Global{
		ConfigFile:     c.path,
		EtcdEndpoints:  c.StringSlice(KeyEtcdEndpoints),
		EtcdPrefix:     c.String(KeyEtcdPrefix),
		Embedded:       c.Bool(KeyEmbedded),
		DataDir:        c.String(KeyDataDir),
		Output:         c.String(KeyOutput),
		LogLevel:       c.String(KeyLogLevel),
		CommandTimeout: c.Duration(KeyCommandTimeout),
		WAL:            c.String(KeyWAL),
		WALToken:       c.String(KeyWALToken),
		LanceRoot:      c.String(KeyLanceRoot),
	}
	switch g.Output {
	case "table", "json":
	default:
		return FlagErrorf("--output must be table or json, not %q", g.Output)
	}
	switch g.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return FlagErrorf("--log-level must be debug, info, warn or error, not %q", g.LogLevel)
	}
	if g.CommandTimeout <= 0 {
		return FlagErrorf("--command-timeout must be positive, not %s", g.CommandTimeout)
	}
	if !strings.HasPrefix(g.EtcdPrefix, "/") || strings.HasSuffix(g.EtcdPrefix, "/") {
		return FlagErrorf("--etcd-prefix must start with / and not end with /, not %q", g.EtcdPrefix)
	}
	if g.DataDir == "" {
		g.DataDir = defaultDataDir()
	}
	if abs, err := filepath.Abs(g.DataDir); err == nil {
		g.DataDir = abs
	}
	if err := resolveLanceRoot(&g); err != nil {
		return err
	}
	if len(g.EtcdEndpoints) == 0 {
		g.Embedded = true
	}
	c.Global = g
	c.resolved = map[string]any{KeyDataDir: g.DataDir, KeyLanceRoot: g.LanceRoot, KeyEmbedded: g.Embedded, KeyEtcdEndpoints: g.EtcdEndpoints}
	return nil
}

// StringSlice returns a list setting; commas separate items in the
// environment and in single flag values alike.
func (c *Config) StringSlice(key string) []string {
	l, _ := c.values[key].([]string)
	return l
}

// String, Bool, Int, Int64, Float64 and Duration return a setting's value,
// parsed with its type when the configuration was loaded. Asking for a
// setting with the wrong type (a programming error) panics.
func (c *Config) String(key string) string          { return get[string](c, key) }
func (c *Config) Bool(key string) bool              { return get[bool](c, key) }
func (c *Config) Int(key string) int                { return get[int](c, key) }
func (c *Config) Int64(key string) int64            { return get[int64](c, key) }
func (c *Config) Float64(key string) float64        { return get[float64](c, key) }
func (c *Config) Duration(key string) time.Duration { return get[time.Duration](c, key) }

func get[T any](c *Config, key string) T {
	v, ok := c.values[key]
	if !ok {
		panic(fmt.Sprintf("setting %q is not registered", key))
	}
	return v.(T)
}

// Value returns a setting's effective value in its native type.
func (c *Config) Value(key string) any {
	if v, ok := c.resolved[key]; ok {
		return v
	}
	return c.values[key]
}

// Source tells where a setting's effective value came from.
func (c *Config) Source(key string) string {
	if f, ok := c.flags[key]; ok && f.Changed {
		return SourceFlag
	}
	if s, ok := LookupSetting(key); ok {
		if os.Getenv(s.Env()) != "" { // viper, too, ignores an empty variable
			return SourceEnv
		}
	}
	if c.file.IsSet(key) {
		return SourceFile
	}
	return SourceDefault
}

// File is the config file that was read, or "".
func (c *Config) File() string { return c.path }

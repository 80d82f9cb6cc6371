package cmdutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/walctl/walctl/internal/core/errs"
)

// resolve parses every registered setting once, with its type, from the
// source that wins (flag > env > file > default). A value that does not
// parse is errs.ErrInvalid naming the key, the source and the value: a
// setting never silently becomes its zero.
func (c *Config) resolve() error {
	c.values = map[string]any{}
	for _, s := range Settings() {
		raw, from := c.raw(s)
		v, err := parseSetting(s.Default, raw)
		if err != nil {
			return fmt.Errorf("setting %s: invalid value %q from %s: %v: %w", s.Key, display(raw), from, err, errs.ErrInvalid)
		}
		c.values[s.Key] = v
	}
	return nil
}

// raw returns a setting's value as its winning source holds it, and that
// source described for an error message.
func (c *Config) raw(s Setting) (any, string) {
	switch c.Source(s.Key) {
	case SourceFlag:
		f := c.flags[s.Key]
		switch fv := f.Value.(type) {
		case *ByteSize:
			return *fv.V, "flag --" + f.Name
		case pflag.SliceValue:
			return fv.GetSlice(), "flag --" + f.Name
		}
		return f.Value.String(), "flag --" + f.Name
	case SourceEnv:
		return os.Getenv(s.Env()), "env " + s.Env()
	case SourceFile:
		return c.file.Get(s.Key), "file " + c.path
	}
	return s.Default, "default"
}

func display(raw any) string {
	if l, ok := raw.([]any); ok {
		parts := make([]string, len(l))
		for i, x := range l {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(raw)
}

// parseSetting converts raw (a string from a flag or the environment, or a
// YAML value) to the type of def.
func parseSetting(def, raw any) (any, error) {
	if raw == nil {
		return def, nil
	}
	str := fmt.Sprint(raw)
	switch def.(type) {
	case string:
		if _, scalar := raw.([]any); scalar {
			return nil, fmt.Errorf("want a string, not a list")
		}
		return str, nil
	case bool:
		if b, ok := raw.(bool); ok {
			return b, nil
		}
		return strconv.ParseBool(strings.TrimSpace(str))
	case int:
		if n, ok := raw.(int); ok {
			return n, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(str))
		if err != nil {
			return nil, fmt.Errorf("want an integer")
		}
		return n, nil
	case int64:
		return parseSize(raw)
	case float64:
		if x, ok := raw.(float64); ok {
			return x, nil
		}
		return strconv.ParseFloat(strings.TrimSpace(str), 64)
	case time.Duration:
		if d, ok := raw.(time.Duration); ok {
			return d, nil
		}
		d, err := time.ParseDuration(strings.TrimSpace(str))
		if err != nil {
			return nil, fmt.Errorf("want a duration such as 500ms, 30s or 5m")
		}
		return d, nil
	case []string:
		return parseList(raw), nil
	}
	return raw, nil
}

// parseSize accepts what ByteSize accepts (64MiB, 1GB, 1048576) and YAML
// integers.
func parseSize(raw any) (int64, error) {
	switch n := raw.(type) {
	case int64:
		return n, nil
	case int:
		if n < 0 {
			return 0, fmt.Errorf("want a size, not a negative number")
		}
		return int64(n), nil
	}
	var v int64
	if err := (&ByteSize{V: &v}).Set(strings.TrimSpace(fmt.Sprint(raw))); err != nil {
		return 0, fmt.Errorf("want a size such as 64MiB, 1GB or 1048576")
	}
	return v, nil
}

// parseList splits a list setting; commas separate items in the
// environment, in single flag values and in YAML strings alike.
func parseList(raw any) []string {
	var items []string
	switch l := raw.(type) {
	case []string:
		items = l
	case []any:
		for _, x := range l {
			items = append(items, fmt.Sprint(x))
		}
	default:
		items = []string{fmt.Sprint(raw)}
	}
	out := []string{}
	for _, item := range items {
		for _, part := range strings.Split(item, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

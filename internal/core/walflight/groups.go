package walflight

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"

	"github.com/walctl/walctl/internal/core/errs"
)

// Groups maps the name of each replicated WAL group to its members' client
// (Flight) addresses, as configured by wal.groups (DESIGN.md §6). The order of
// the addresses is the order in which a client first tries them.
type Groups map[string][]string

var groupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// ParseGroups parses "g1=host:port,host:port,host:port;g2=…". Every group
// needs a valid name and at least one host:port member; a name or a member
// given twice is refused. Errors are errs.ErrInvalid and name the part at
// fault. The empty string is no groups.
func ParseGroups(s string) (Groups, error) {
	out := Groups{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, members, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("WAL group %q: want NAME=host:port,host:port,…: %w", part, errs.ErrInvalid)
		}
		if !groupName.MatchString(name) {
			return nil, fmt.Errorf("WAL group name %q: want 1–63 letters, digits, '_' or '-': %w", name, errs.ErrInvalid)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("WAL group %q is configured twice: %w", name, errs.ErrInvalid)
		}
		seen := map[string]bool{}
		var addrs []string
		for _, a := range strings.Split(members, ",") {
			a = strings.TrimSpace(a)
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				return nil, fmt.Errorf("WAL group %q: member %q is not host:port: %w", name, a, errs.ErrInvalid)
			}
			if seen[a] {
				return nil, fmt.Errorf("WAL group %q: member %s is listed twice: %w", name, a, errs.ErrInvalid)
			}
			seen[a] = true
			addrs = append(addrs, a)
		}
		out[name] = addrs
	}
	return out, nil
}

// Names returns the group names, sorted.
func (g Groups) Names() []string {
	out := make([]string, 0, len(g))
	for n := range g {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Members returns a group's members, or errs.ErrInvalid naming the unknown
// group and the configured ones (a wrong --group is the caller's input).
func (g Groups) Members(name string) ([]string, error) {
	m, ok := g[name]
	if !ok {
		known := "none are configured (wal.groups)"
		if len(g) > 0 {
			known = "configured: " + strings.Join(g.Names(), ", ")
		}
		return nil, fmt.Errorf("unknown WAL group %q; %s: %w", name, known, ErrUnknownGroup)
	}
	return m, nil
}

// String renders the groups in the form ParseGroups reads.
func (g Groups) String() string {
	parts := make([]string, 0, len(g))
	for _, n := range g.Names() {
		parts = append(parts, n+"="+strings.Join(g[n], ","))
	}
	return strings.Join(parts, ";")
}

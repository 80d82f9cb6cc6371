package cmdutil

import (
	"fmt"
	"os"
	"os/user"
)

// Actor names the operator running verb for an audit record:
// user@host (walctl <verb>, pid N).
func Actor(verb string) string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s (walctl %s, pid %d)", name, host, verb, os.Getpid())
}

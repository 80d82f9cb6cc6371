// Command etcd is a real etcd server built from Go modules, for walctl's
// fault tests that must SIGKILL, pause and restart etcd as a process
// (`go install go.etcd.io/etcd/server/v3` is refused because of its replace
// directives). Nothing here is compiled into walctl.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

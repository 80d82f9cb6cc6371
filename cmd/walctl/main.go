// Command walctl moves records from a durable write-ahead log into Lance
// tables exactly once. See `walctl --help`.
package main

import (
	"os"

	"github.com/walctl/walctl/internal/commands"
)

func main() { os.Exit(commands.Main()) }

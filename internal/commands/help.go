package commands

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// usageTemplate is cobra's, except that a verb's help lists only its own
// flags: the global ones are listed once, by `walctl --help`.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if and .HasParent .HasAvailableInheritedFlags}}

Global flags (--data-dir, --etcd-endpoints, --wal, --output, --command-timeout, …): see 'walctl --help'.{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// helpTemplate is cobra's with one EXIT STATUS block: the full table for
// the root command, the verb's own when its help has one, else a summary.
const helpTemplate = `{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}{{exitStatus .}}
`

const exitCodeSummary = `EXIT STATUS
  0 success, 2 usage or invalid input, 3 not found, 4 conflict or fenced,
  5 dependency unavailable, 6 data integrity, 130 interrupted (see 'walctl --help')`

func exitStatus(c *cobra.Command) string {
	switch {
	case !c.HasParent():
		return "\n" + exitCodeHelp + "\n"
	case strings.Contains(c.Long, "EXIT STATUS"):
		return ""
	}
	return "\n" + exitCodeSummary + "\n"
}

func init() { cobra.AddTemplateFunc("exitStatus", exitStatus) }

// unknownSubcommand returns a usage error when args name a command group
// followed by a word that is none of its commands (`walctl wal apend`):
// cobra would print the group's help and exit 0.
func unknownSubcommand(root *cobra.Command, args []string) (*cobra.Command, error) {
	c, rest, err := root.Find(args)
	if err != nil || c == root || c.Runnable() || !c.HasSubCommands() {
		return root, nil
	}
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.AddFlagSet(c.Flags())
	fs.AddFlagSet(c.InheritedFlags())
	fs.Usage = func() {}
	if fs.Parse(rest) != nil || fs.NArg() == 0 {
		return root, nil
	}
	word := fs.Arg(0)
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return c, cmdutil.FlagErrorf("%s", msg)
}

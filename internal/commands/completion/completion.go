// Package completion implements `walctl completion`.
package completion

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// Shells are the shells walctl writes completion scripts for, with the file
// name used under completions/ in the repository and release archives.
var Shells = map[string]string{
	"bash":       "walctl.bash",
	"zsh":        "_walctl",
	"fish":       "walctl.fish",
	"powershell": "walctl.ps1",
}

// NewCmdCompletion returns `walctl completion`.
func NewCmdCompletion() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Write a shell completion script to stdout",
		Example: `  source <(walctl completion bash)
  walctl completion zsh > "${fpath[1]}/_walctl"
  walctl completion fish > ~/.config/fish/completions/walctl.fish`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.FlagErrorf("completion needs one shell: bash, zsh, fish or powershell")
			}
			if _, ok := Shells[args[0]]; !ok {
				return cmdutil.FlagErrorf("unknown shell %q: use bash, zsh, fish or powershell", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return Write(cmd.Root(), args[0], cmd.OutOrStdout())
		},
	}
}

// Write writes the completion script of root for shell to w.
func Write(root *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	}
	return fmt.Errorf("unknown shell %q", shell)
}

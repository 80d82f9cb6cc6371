package completion

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// root is a small walctl-like tree with the completion verb in it.
func root() *cobra.Command {
	r := &cobra.Command{Use: "walctl", SilenceErrors: true, SilenceUsage: true}
	r.AddCommand(&cobra.Command{Use: "doctor", Short: "Check every configured dependency", Run: func(*cobra.Command, []string) {}})
	r.AddCommand(NewCmdCompletion())
	return r
}

func run(args ...string) (string, error) {
	r := root()
	var out bytes.Buffer
	r.SetOut(&out)
	r.SetErr(&bytes.Buffer{})
	r.SetArgs(args)
	err := r.Execute()
	return out.String(), err
}

// Each shell gets its own script on stdout, naming the program and its
// commands.
func TestCompletionRun(t *testing.T) {
	marks := map[string]string{"bash": "__start_walctl", "zsh": "#compdef walctl", "fish": "complete -c walctl", "powershell": "Register-ArgumentCompleter"}
	for shell := range Shells {
		out, err := run("completion", shell)
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		if !strings.Contains(out, marks[shell]) {
			t.Fatalf("%s: script lacks %q:\n%.300s", shell, marks[shell], out)
		}
	}
	if len(marks) != len(Shells) {
		t.Fatalf("shells %v, test knows %v", Shells, marks)
	}
}

// No shell, two shells or an unknown one is a usage error (exit 2) naming
// the shells, with nothing on stdout.
func TestCompletionRunUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "bash", "zsh"}, {"completion", "tcsh"}} {
		out, err := run(args...)
		if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "bash, zsh, fish or powershell") || out != "" {
			t.Fatalf("%v: err %v, stdout %q", args, err, out)
		}
	}
	if err := Write(root(), "tcsh", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "tcsh") {
		t.Fatalf("Write tcsh: %v", err)
	}
}

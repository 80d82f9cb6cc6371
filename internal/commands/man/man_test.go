package man

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
)

// root is a small walctl-like tree with the man verb in it.
func root() *cobra.Command {
	r := &cobra.Command{Use: "walctl", SilenceErrors: true, SilenceUsage: true}
	wal := &cobra.Command{Use: "wal", Short: "The write-ahead log"}
	wal.AddCommand(&cobra.Command{Use: "serve", Short: "Serve the WAL", Long: "Serve it.\n\nEXIT STATUS\n  0  stopped by a signal",
		Run: func(*cobra.Command, []string) {}})
	r.AddCommand(wal, NewCmdMan())
	return r
}

func run(args ...string) error {
	r := root()
	r.SetOut(&bytes.Buffer{})
	r.SetErr(&bytes.Buffer{})
	r.SetArgs(args)
	return r.Execute()
}

// walctl man DIR writes one page per command, creating DIR, with the
// command's long help (EXIT STATUS included), and writes the same bytes
// every time (the staleness check compares them).
func TestManRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if err := run("man", dir); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "walctl-wal-serve.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "EXIT STATUS") || !strings.Contains(string(page), "WALCTL") {
		t.Fatalf("page lacks its help:\n%s", page)
	}
	for _, name := range []string{"walctl.1", "walctl-wal.1", "walctl-man.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("no page %s: %v", name, err)
		}
	}
	again := t.TempDir()
	if err := run("man", again); err != nil {
		t.Fatal(err)
	}
	if second, err := os.ReadFile(filepath.Join(again, "walctl-wal-serve.1")); err != nil || !bytes.Equal(page, second) {
		t.Fatalf("a second run writes different bytes: %v", err)
	}
}

// Without a directory, or with two, it is a usage error (exit 2); a
// directory that cannot be created is an error naming it.
func TestManRunErrors(t *testing.T) {
	for _, args := range [][]string{{"man"}, {"man", "a", "b"}} {
		if err := run(args...); !cmdutil.IsFlagError(err) {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("man", filepath.Join(file, "man1")); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("man under a file: %v", err)
	}
}

package commands

import (
	"os"
	"path/filepath"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/completion"
	"github.com/walctl/walctl/internal/commands/man"
)

// GenerateDocs writes the shell completions into <dir>/completions and the
// man pages into <dir>/man, exactly as `walctl completion` and `walctl man`
// produce them. The repository keeps both checked in; a test regenerates them
// into a temporary directory and fails when the checked-in copies are stale.
func GenerateDocs(dir string) error {
	ios, _, _, _ := cmdutil.Test()
	root := NewRootCmd(cmdutil.NewFactory(ios))
	compDir := filepath.Join(dir, "completions")
	if err := os.MkdirAll(compDir, 0o755); err != nil {
		return err
	}
	for shell, name := range completion.Shells {
		f, err := os.Create(filepath.Join(compDir, name))
		if err != nil {
			return err
		}
		if err := completion.Write(root, shell, f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return man.Generate(root, filepath.Join(dir, "man"))
}

package commands

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

var update = flag.Bool("update", false, "rewrite completions/ and man/ in the repository (make generate)")

// TestGeneratedFilesUpToDate fails when completions/ or man/ differ from
// what the current command tree generates. `make generate` refreshes them.
func TestGeneratedFilesUpToDate(t *testing.T) {
	repo := filepath.Join("..", "..")
	if *update {
		for _, d := range []string{"completions", "man"} {
			if err := os.RemoveAll(filepath.Join(repo, d)); err != nil {
				t.Fatal(err)
			}
		}
		if err := GenerateDocs(repo); err != nil {
			t.Fatal(err)
		}
	}
	fresh := t.TempDir()
	if err := GenerateDocs(fresh); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"completions", "man"} {
		want := listDir(t, filepath.Join(fresh, d))
		got := listDir(t, filepath.Join(repo, d))
		for name, content := range want {
			old, ok := got[name]
			if !ok {
				t.Errorf("%s/%s is missing: run `make generate`", d, name)
			} else if !bytes.Equal(old, content) {
				t.Errorf("%s/%s is stale: run `make generate`", d, name)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s/%s is no longer generated: run `make generate`", d, name)
			}
		}
	}
}

func listDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

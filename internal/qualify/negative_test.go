package qualify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/publish"
	"github.com/walctl/walctl/internal/testutil/proc"
)

// copyTables copies the Lance root to a new directory for altering.
func copyTables(t *testing.T, lanceRoot, to string) string {
	t.Helper()
	if out, err := exec.Command("cp", "-a", lanceRoot, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return filepath.Join(to, table+".lance")
}

// publishedFile returns the descriptor of the latest version's first walctl
// data file in the table at root.
func publishedFile(t *testing.T, root string) (*lance.Dataset, lance.Descriptor) {
	t.Helper()
	ds, err := lance.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Latest()
	if err != nil {
		t.Fatal(err)
	}
	atts, err := publish.NewStore(root).AllAttempts()
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range m.Fragments {
		for _, a := range atts {
			for _, f := range a.Files {
				if strings.TrimPrefix(f.Descriptor.Path, "data/") == frag.Files[0].Path {
					return ds, f.Descriptor
				}
			}
		}
	}
	t.Fatal("no walctl data file in the latest version")
	return nil, lance.Descriptor{}
}

// negativeControls alters copies of the verified table and requires walctl
// verify to fail on each (exit 6, naming the problem), and to still pass on
// the original.
func negativeControls(ctx context.Context, t *testing.T, procs *proc.Runner, lanceRoot string, env []string) {
	t.Helper()
	for _, c := range []struct {
		name  string
		alter func(root string)
		kind  string
	}{
		{"duplicated-fragment", func(root string) {
			ds, desc := publishedFile(t, root)
			m, err := ds.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ds.Commit(ctx, lance.CommitRequest{ParentVersion: m.Version, Kind: lance.Append, Files: []lance.Descriptor{desc}}); err != nil {
				t.Fatal(err)
			}
		}, `"kind": "duplicated"`},
		{"flipped-byte", func(root string) {
			_, desc := publishedFile(t, root)
			p := filepath.Join(root, desc.Path)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/3] ^= 0x01
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, `"kind": "damaged-file"`},
		{"rolled-back-version", func(root string) {
			ds, err := lance.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			vs, err := ds.Versions()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(vs[len(vs)-1].Path); err != nil {
				t.Fatal(err)
			}
		}, `"kind": "missing"`},
	} {
		altered := filepath.Join(procs.Dir, "altered-"+c.name)
		c.alter(copyTables(t, lanceRoot, altered))
		r := procs.Run(t, "verify-"+c.name, env, "verify", "--table", table, "--lance-root", altered, "--output", "json")
		if r.Code != 6 || !strings.Contains(r.Stdout, `"ok": false`) || !strings.Contains(r.Stdout, c.kind) {
			t.Fatalf("verify of the %s copy: want exit 6 with %s; %s", c.name, c.kind, r)
		}
	}
	if r := procs.Run(t, "verify", env, "verify", "--table", table); r.Code != 0 {
		t.Fatalf("verify of the original after the controls: %s", r)
	}
}

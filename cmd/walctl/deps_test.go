package main

import (
	"os/exec"
	"strings"
	"testing"
)

// thirdPartyTesting are the libraries linked into walctl that import
// testing themselves, each with why it is accepted. Only third-party
// packages may be listed: walctl's own test helpers live in *test packages
// that only tests import.
var thirdPartyTesting = map[string]string{
	// hashicorp/raft v1.8.0 ships its cluster test helpers (MakeCluster…)
	// in testing.go, a non-test file without a build tag; walctl never
	// calls them, and since Go 1.13 importing testing registers no flags.
	"github.com/hashicorp/raft": "testing.go of the Raft library (issue 15)",
}

// TestNoTestingInBinary keeps test code out of the shipped binary: no
// walctl package linked into walctl may import testing (test helpers live
// in *test packages that only tests import), nor any other library than
// those listed in thirdPartyTesting.
func TestNoTestingInBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if imp == "testing" && (strings.HasPrefix(pkg, "github.com/walctl/") || thirdPartyTesting[pkg] == "") {
				t.Errorf("%s imports testing and is linked into walctl", pkg)
			}
		}
	}
}

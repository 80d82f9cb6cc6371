package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestingInBinary keeps test code out of the shipped binary: no
// package linked into walctl may import testing (test helpers live in
// *test packages that only tests import).
func TestNoTestingInBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if imp == "testing" {
				t.Errorf("%s imports testing and is linked into walctl", pkg)
			}
		}
	}
}

package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A machine without the binary fails with instructions instead of skipping.
func TestBinaryPathNamesTheMakeTarget(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module github.com/walctl/walctl\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "core", "kube")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)
	_, err := BinaryPath()
	if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), "make kube-apiserver") {
		t.Fatalf("BinaryPath without a binary = %v; want ErrNoBinary naming `make kube-apiserver`", err)
	}
	if _, err := Start(t.Context(), Options{Dir: t.TempDir()}); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("Start without a binary = %v, want ErrNoBinary", err)
	}
	bin := filepath.Join(root, "bin", "kube-apiserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := BinaryPath(); err != nil || got != bin {
		t.Fatalf("BinaryPath = %q, %v; want %q", got, err, bin)
	}
}

func TestDecodeShippedRBACIsNamespacedOnly(t *testing.T) {
	path, err := DeployFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1."))
	}
	if got := strings.Join(kinds, ","); got != "ServiceAccount,Role,RoleBinding" {
		t.Fatalf("deploy/rbac.yaml holds %s, want ServiceAccount,Role,RoleBinding", got)
	}
}

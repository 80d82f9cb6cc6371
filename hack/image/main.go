// Command walctl-image writes the walctl container image as an OCI image
// layout, offline: a static walctl binary on an empty base (no shell, no
// libc, no base image from a registry), run as the non-root user 65532.
// No Docker daemon and no registry are involved (go-containerregistry's
// empty.Image, mutate and layout packages).
//
// The image is reproducible: every timestamp in the layer and the config is
// -created (the commit time in `make image`), owners and modes are fixed,
// and entries are written in a fixed order, so the same binary always gives
// the same digest.
//
// With -template and -pinned-template it also writes the reviewed Job
// template with its image replaced by repo@digest, for the bundle's
// ConfigMap (kustomize's images transformer rewrites Pod specs, not YAML
// held in a ConfigMap's data).
//
//	walctl-image -binary dist/image/walctl -layout dist/image/oci \
//	    -repo ghcr.io/walctl/walctl -created 1767225600 -digest-file dist/image/digest
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const (
	uid        = 65532
	binaryPath = "usr/local/bin/walctl"
)

type options struct {
	binary, layoutDir, repo, arch, digestFile, version string
	template, pinnedTemplate                           string
	created                                            int64
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "static linux walctl binary to put at /"+binaryPath)
	flag.StringVar(&o.layoutDir, "layout", "", "directory to write the OCI image layout to (replaced)")
	flag.StringVar(&o.repo, "repo", "ghcr.io/walctl/walctl", "image repository (printed and pinned as repo@digest)")
	flag.StringVar(&o.arch, "arch", "amd64", "GOARCH of the binary")
	flag.StringVar(&o.version, "version", "dev", "walctl version (image label and the layout's ref.name)")
	flag.Int64Var(&o.created, "created", 0, "Unix time of every timestamp in the image (reproducibility)")
	flag.StringVar(&o.digestFile, "digest-file", "", "file to write the manifest digest to")
	flag.StringVar(&o.template, "template", "", "reviewed Job template to pin (optional)")
	flag.StringVar(&o.pinnedTemplate, "pinned-template", "", "where to write the template pinned to repo@digest")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "walctl-image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.binary == "" || o.layoutDir == "" {
		return errors.New("-binary and -layout are required")
	}
	if (o.template == "") != (o.pinnedTemplate == "") {
		return errors.New("-template and -pinned-template go together")
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(o.layoutDir, empty.Index)
	if err != nil {
		return err
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": o.version}
	if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return err
	}
	if err := check(p, digest, o); err != nil {
		return err
	}
	if o.digestFile != "" {
		if err := os.WriteFile(o.digestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	if o.template != "" {
		if err := pinTemplate(o.template, o.pinnedTemplate, o.repo+"@"+digest.String()); err != nil {
			return err
		}
	}
	fmt.Println(o.repo + "@" + digest.String())
	return nil
}

// build stacks one layer on an empty OCI image and sets the config.
func build(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, err
	}
	created := time.Unix(o.created, 0).UTC()
	tarBytes, err := rootfs(bin, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "walctl-image: static walctl on an empty base"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{"/" + binaryPath},
		Env:        []string{"PATH=/usr/local/bin", "HOME=/home/nonroot"},
		WorkingDir: "/home/nonroot",
		Labels: map[string]string{
			"org.opencontainers.image.source":  "https://github.com/walctl/walctl",
			"org.opencontainers.image.version": o.version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// check reads the image back from the layout and validates it (every
// blob's digest and size, the layer's diff id, the manifest and config),
// and that it runs walctl as the non-root user.
func check(p layout.Path, digest v1.Hash, o options) error {
	img, err := p.Image(digest)
	if err != nil {
		return err
	}
	if err := validate.Image(img); err != nil {
		return fmt.Errorf("written image does not validate: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.Config.User != fmt.Sprintf("%d:%d", uid, uid) || cf.Architecture != o.arch {
		return fmt.Errorf("written image config: user %q arch %q", cf.Config.User, cf.Architecture)
	}
	return nil
}

// rootfs is the layer: the binary, a passwd/group naming the non-root user
// (so tools that resolve the user find one), its home and a sticky /tmp.
func rootfs(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid))
		},
		func() error { return file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", uid)) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, uid) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
		func() error { return file(binaryPath, 0o755, bin) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageLine is the template's image reference: any tag or digest of repo.
var imageLine = regexp.MustCompile(`(?m)^([ \t]*image:[ \t]*)(\S+)[ \t]*$`)

// pinTemplate writes the template with its one image replaced by ref. A
// template with no image or several is refused: the reviewed template has
// exactly one container.
func pinTemplate(src, dst, ref string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if n := len(imageLine.FindAll(b, -1)); n != 1 {
		return fmt.Errorf("%s: %d image lines, want exactly 1", src, n)
	}
	out := imageLine.ReplaceAll(b, []byte("${1}"+ref))
	return os.WriteFile(dst, out, 0o644)
}

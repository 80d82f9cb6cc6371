package lance

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
)

const (
	versionsDir = "_versions"
	dataDir     = "data"
	// tmpDir holds manifests being committed; it is inside the dataset so
	// that link(2) stays on one filesystem, and outside _versions so that no
	// reader ever lists a half-written manifest.
	tmpDir = "_walctl/tmp"
)

// Dataset is a Lance dataset directory (<lance-root>/<table>.lance). It holds
// no cached state: every method reads the directory afresh, so one Dataset
// may be shared by goroutines.
type Dataset struct {
	root string
	// Hooks are called at named points of Commit (fault injection, pauses).
	Hooks Hooks
}

// Open opens the dataset at root. It fails with ErrDatasetNotFound when root
// has no _versions directory, or one without a version: a creation cut short
// (a crash or a power loss) before version 1 was linked leaves that layout,
// and Create finishes it. Open writes nothing.
func Open(root string) (*Dataset, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, errs.ErrInvalid)
	}
	st, err := os.Stat(filepath.Join(abs, versionsDir))
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: no %s directory: %w", abs, versionsDir, ErrDatasetNotFound)
	}
	d := &Dataset{root: abs}
	if _, err := d.LatestVersion(); errors.Is(err, ErrVersionNotFound) {
		return nil, fmt.Errorf("%s: no version yet (a creation cut short): %w", abs, ErrDatasetNotFound)
	}
	return d, nil
}

// Root returns the dataset's absolute directory.
func (d *Dataset) Root() string { return d.root }

// VersionInfo names one version's manifest file.
type VersionInfo struct {
	Version uint64
	Path    string
	// V2Naming tells whether the file is named {u64::MAX - v}.manifest.
	V2Naming bool
}

// parseManifestName returns the version a _versions entry names.
func parseManifestName(name string) (uint64, bool, bool) {
	stem, ok := strings.CutSuffix(name, ".manifest")
	if !ok || stem == "" {
		return 0, false, false
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	if err != nil {
		return 0, false, false
	}
	if len(stem) == 20 {
		return math.MaxUint64 - n, true, true
	}
	return n, false, true
}

func manifestName(v uint64, v2 bool) string {
	if v2 {
		return fmt.Sprintf("%020d.manifest", uint64(math.MaxUint64)-v)
	}
	return fmt.Sprintf("%d.manifest", v)
}

// Versions lists the dataset's versions in ascending order.
func (d *Dataset) Versions() ([]VersionInfo, error) {
	dir := filepath.Join(d.root, versionsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", dir, ErrDatasetNotFound)
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []VersionInfo
	for _, e := range entries {
		if v, v2, ok := parseManifestName(e.Name()); ok && !e.IsDir() {
			out = append(out, VersionInfo{Version: v, Path: filepath.Join(dir, e.Name()), V2Naming: v2})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// LatestVersion returns the highest version number.
func (d *Dataset) LatestVersion() (uint64, error) {
	vs, err := d.Versions()
	if err != nil {
		return 0, err
	}
	if len(vs) == 0 {
		return 0, fmt.Errorf("%s has no versions: %w", d.root, ErrVersionNotFound)
	}
	return vs[len(vs)-1].Version, nil
}

// Manifest reads version v. A missing version is ErrVersionNotFound; one
// that does not parse is ErrCorruptManifest naming the file.
func (d *Dataset) Manifest(v uint64) (*Manifest, error) {
	for _, v2 := range []bool{true, false} {
		p := filepath.Join(d.root, versionsDir, manifestName(v, v2))
		raw, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		m, err := parseManifest(p, raw)
		if err != nil {
			return nil, err
		}
		if m.Version != v {
			return nil, fmt.Errorf("%s: file name says version %d, manifest says %d: %w", p, v, m.Version, ErrCorruptManifest)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: version %d: %w", d.root, v, ErrVersionNotFound)
}

// SyncVersions fsyncs the directory of manifests, making every version
// linked so far durable (a commit linked by a process that died before its
// directory sync is visible before it is durable). An error wraps
// durable.ErrSyncFailed: never call it again and trust the answer, the
// versions it covered must be taken as possibly lost.
func (d *Dataset) SyncVersions() error {
	return durable.SyncDir(filepath.Join(d.root, versionsDir))
}

// SyncLayout fsyncs the dataset's directories (_versions, data, _walctl)
// and the Lance root that holds the dataset's own name, so that a layout
// created by a process that died before its syncs is durable before
// anything is built on it. A publisher calls it once when it opens a table;
// an error wraps durable.ErrSyncFailed.
func (d *Dataset) SyncLayout() error {
	for _, dir := range []string{versionsDir, dataDir, filepath.Dir(tmpDir), ".", ".."} {
		p := filepath.Clean(filepath.Join(d.root, dir))
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue // an official writer's table may have no _walctl
		}
		if err := durable.SyncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// Latest reads the highest version.
func (d *Dataset) Latest() (*Manifest, error) {
	v, err := d.LatestVersion()
	if err != nil {
		return nil, err
	}
	return d.Manifest(v)
}

// CreateOptions configure Create.
type CreateOptions struct {
	// FileVersion is the table's data_format; DefaultFileVersion if zero.
	FileVersion FileVersion
	// Config is the initial config map.
	Config map[string]string
	// TxnID identifies the creating transaction (a uuid if empty).
	TxnID string
}

// Create makes a new empty dataset at root with the given schema as
// version 1 (an Overwrite transaction with no fragments, as the official
// writer's createEmptyTable does). Unsupported field types are refused before
// anything is written; an existing dataset is ErrDatasetExists. A layout
// without a version (a creation cut short) is finished.
func Create(root string, schema *arrow.Schema, opts CreateOptions) (*Dataset, error) {
	s, err := lancefile.FromArrow(schema)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, errs.ErrInvalid)
	}
	if _, err := Open(abs); err == nil {
		return nil, fmt.Errorf("%s: %w", abs, ErrDatasetExists)
	}
	// Each new directory is synced, and so is the parent that got its name,
	// up to the first one that existed (the Lance root's parent when the
	// root is new): the dataset cannot vanish under a later commit.
	for _, dir := range []string{versionsDir, dataDir, tmpDir} {
		if err := durable.MkdirAll(filepath.Join(abs, dir), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", abs, err)
		}
	}
	d := &Dataset{root: abs}
	if err := d.SyncLayout(); err != nil {
		return nil, err
	}
	if err := d.commitInitial(s, opts); err != nil {
		return nil, err
	}
	return d, nil
}

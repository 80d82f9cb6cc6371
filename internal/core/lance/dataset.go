package lance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
	"github.com/walctl/walctl/internal/core/objstore"
)

const (
	versionsDir = "_versions"
	dataDir     = "data"
	// tmpDir holds manifests being committed on a local store; it is inside
	// the dataset so that link(2) stays on one filesystem, and outside
	// _versions so that no reader ever lists a half-written manifest.
	tmpDir = objstore.TempDir
)

// Dataset is a Lance dataset (<lance-root>/<table>.lance) on a store: a
// local directory or an S3 prefix. It holds no cached state: every method
// reads the store afresh, so one Dataset may be shared by goroutines.
type Dataset struct {
	store objstore.Store
	root  string
	// Hooks are called at named points of Commit (fault injection, pauses).
	Hooks Hooks
}

// Open opens the dataset in the local directory root (see OpenStore).
func Open(root string) (*Dataset, error) {
	if objstore.HasScheme(root) {
		return nil, fmt.Errorf("%s: %w", root, ErrNotLocal)
	}
	return OpenStore(objstore.NewLocal(root))
}

// OpenStore opens the dataset rooted at s. It fails with ErrDatasetNotFound
// when s has no _versions entry, or none that names a version: a creation
// cut short (a crash or a power loss) before version 1 was committed leaves
// that layout, and Create finishes it. OpenStore writes nothing.
func OpenStore(s objstore.Store) (*Dataset, error) {
	d := &Dataset{store: s, root: s.String()}
	if _, err := d.LatestVersion(); errors.Is(err, ErrVersionNotFound) {
		return nil, fmt.Errorf("%s: no version yet (none, or a creation cut short): %w", d.root, ErrDatasetNotFound)
	} else if err != nil {
		return nil, err
	}
	return d, nil
}

// Root names the dataset: its absolute directory, or s3://bucket/prefix.
func (d *Dataset) Root() string { return d.root }

// Store returns the store the dataset lives on.
func (d *Dataset) Store() objstore.Store { return d.store }

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
	entries, err := d.store.List(context.Background(), versionsDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.store.Join(versionsDir), err)
	}
	var out []VersionInfo
	for _, e := range entries {
		if v, v2, ok := parseManifestName(path.Base(e.Key)); ok {
			out = append(out, VersionInfo{Version: v, Path: d.store.Join(e.Key), V2Naming: v2})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			// Two winners of one version (rule 23): which one readers see
			// depends on the reader, so nothing is built on either.
			return nil, fmt.Errorf("version %d has two manifests, %s and %s: %w", out[i].Version, out[i-1].Path, out[i].Path, ErrCorruptManifest)
		}
	}
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
		key := versionsDir + "/" + manifestName(v, v2)
		p := d.store.Join(key)
		raw, err := d.store.Get(context.Background(), key)
		if errors.Is(err, objstore.ErrNotFound) {
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
		m.V2Naming = v2
		return m, nil
	}
	return nil, fmt.Errorf("%s: version %d: %w", d.root, v, ErrVersionNotFound)
}

// SyncVersions fsyncs the directory of manifests, making every version
// linked so far durable (a commit linked by a process that died before its
// directory sync is visible before it is durable). An error wraps
// durable.ErrSyncFailed: never call it again and trust the answer, the
// versions it covered must be taken as possibly lost. On an object store a
// listed version is durable and this is a no-op.
func (d *Dataset) SyncVersions() error {
	return d.store.SyncDirs(context.Background(), versionsDir)
}

// SyncLayout fsyncs the dataset's directories (_versions, data, _walctl)
// and the Lance root that holds the dataset's own name, so that a layout
// created by a process that died before its syncs is durable before
// anything is built on it. A publisher calls it once when it opens a table;
// an error wraps durable.ErrSyncFailed. A no-op on an object store.
func (d *Dataset) SyncLayout() error {
	return d.store.SyncDirs(context.Background(), versionsDir, dataDir, path.Dir(tmpDir), ".", "..")
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

// Create makes a new empty dataset in the local directory root (see
// CreateStore).
func Create(root string, schema *arrow.Schema, opts CreateOptions) (*Dataset, error) {
	if objstore.HasScheme(root) {
		return nil, fmt.Errorf("%s: %w", root, ErrNotLocal)
	}
	return CreateStore(objstore.NewLocal(root), schema, opts)
}

// CreateStore makes a new empty dataset on s with the given schema as
// version 1 (an Overwrite transaction with no fragments, as the official
// writer's createEmptyTable does). Unsupported field types are refused before
// anything is written; an existing dataset is ErrDatasetExists. A layout
// without a version (a creation cut short) is finished.
func CreateStore(st objstore.Store, schema *arrow.Schema, opts CreateOptions) (*Dataset, error) {
	s, err := lancefile.FromArrow(schema)
	if err != nil {
		return nil, err
	}
	if _, err := OpenStore(st); err == nil {
		return nil, fmt.Errorf("%s: %w", st, ErrDatasetExists)
	}
	// Each new directory is synced, and so is the parent that got its name,
	// up to the first one that existed (the Lance root's parent when the
	// root is new): the dataset cannot vanish under a later commit.
	if err := st.MakeDirs(context.Background(), versionsDir, dataDir, tmpDir); err != nil {
		return nil, err
	}
	d := &Dataset{store: st, root: st.String()}
	if err := d.SyncLayout(); err != nil {
		return nil, err
	}
	if err := d.commitInitial(s, opts); err != nil {
		return nil, err
	}
	return d, nil
}

// RemoveVersion deletes the manifest of version v, which must be the
// oldest and must not be the latest (a table always keeps its latest
// version). Versions go oldest first so that a version's parent is gone
// before the version itself: a commit that fills a freed number then
// finds its parent missing and undoes itself (confirmFresh). The data
// files it referenced are left for the caller to judge.
func (d *Dataset) RemoveVersion(ctx context.Context, v uint64) error {
	vs, err := d.Versions()
	if err != nil {
		return err
	}
	if len(vs) > 0 && vs[len(vs)-1].Version == v {
		return fmt.Errorf("version %d of %s is the latest: %w", v, d.root, errs.ErrInvalid)
	}
	if len(vs) == 0 || vs[0].Version > v {
		return fmt.Errorf("version %d of %s: %w", v, d.root, ErrVersionNotFound)
	}
	if vs[0].Version != v {
		return fmt.Errorf("version %d of %s is not the oldest (%d): versions are removed oldest first: %w", v, d.root, vs[0].Version, errs.ErrConflict)
	}
	return d.store.Delete(ctx, versionsDir+"/"+manifestName(v, vs[0].V2Naming))
}

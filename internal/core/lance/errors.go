// Package lance reads and writes Lance datasets (tables) in pure Go: data
// files in Lance file format 2.0 or 2.1, manifests, and put-if-not-exists
// commits of new versions on a local filesystem. What it writes opens,
// filters, time-travels and appends with the official LanceDB reader; the
// tests prove it against the official Node package (tools/lance-oracle).
//
// The materializer uses it in this order: Open (or Create) a dataset, stream
// batches through CreateFile into attempt-unique data files, VerifyFile each
// Descriptor, then Commit them against the exact parent version; a lost race
// is ErrCommitConflict, an unknown outcome ErrCommitUnknown, resolved with
// FindTransaction.
package lance

import (
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancefile"
)

var (
	// ErrCommitConflict means another writer created the version this commit
	// attempted. Nothing of this attempt is in the table; re-read the latest
	// version and build a new attempt on it (the Check runs again).
	ErrCommitConflict = fmt.Errorf("version already exists: %w", errs.ErrConflict)
	// ErrCommitUnknown means the new manifest may or may not be durable (an
	// error after the link). Resolve it with FindTransaction, never by
	// committing the same files again blindly.
	ErrCommitUnknown = fmt.Errorf("commit outcome unknown: %w", errs.ErrUnavailable)
	// ErrVersionNotFound means the requested version has no manifest.
	ErrVersionNotFound = fmt.Errorf("version not found: %w", errs.ErrNotFound)
	// ErrDatasetNotFound means the path holds no Lance dataset.
	ErrDatasetNotFound = fmt.Errorf("dataset not found: %w", errs.ErrNotFound)
	// ErrNotLocal is a table path with a URL scheme (s3://…) given where a
	// local directory is expected: such tables are opened through their
	// store (OpenStore), never read as a relative path.
	ErrNotLocal = fmt.Errorf("a table on object storage needs its store (this operation reads and writes local directories only): %w", errs.ErrInvalid)
	// ErrDatasetExists is Create on an existing dataset.
	ErrDatasetExists = fmt.Errorf("dataset already exists: %w", errs.ErrConflict)
	// ErrCorruptManifest means a manifest file does not parse.
	ErrCorruptManifest = fmt.Errorf("corrupt manifest: %w", errs.ErrCorrupt)
	// ErrCorruptFile means a data file is truncated, has a wrong footer or
	// does not match its descriptor.
	ErrCorruptFile = lancefile.ErrCorrupt
	// ErrMissingFile means a data file named by a manifest or descriptor does
	// not exist.
	ErrMissingFile = fmt.Errorf("data file missing: %w", errs.ErrNotFound)
	// ErrUnsupported means walctl cannot read or extend something an official
	// writer produced (compressed pages, deletion files, stable row ids ...).
	ErrUnsupported = lancefile.ErrUnsupported
	// ErrUnsupportedType is returned for an Arrow type walctl cannot store;
	// the message names the field and the type.
	ErrUnsupportedType = lancefile.ErrUnsupportedType
)

// FileVersion is a Lance data-file format version (2.0 or 2.1).
type FileVersion = lancefile.Version

// Data file format versions.
const (
	FileVersion2_0 = lancefile.V2_0
	FileVersion2_1 = lancefile.V2_1
	// DefaultFileVersion is used by Create; see lancefile.V2_0 for why.
	DefaultFileVersion = lancefile.V2_0
)

// Schema is a flat Lance schema: Arrow fields plus Lance field ids.
type Schema = lancefile.Schema

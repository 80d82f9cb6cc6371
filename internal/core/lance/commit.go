package lance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/lancepb"
	"github.com/walctl/walctl/internal/core/objstore"
)

// Writer identity recorded in every manifest walctl writes.
const (
	writerLibrary = "walctl"
	writerVersion = "0.1.0"
)

// Feature flags (lance-table/src/feature_flags.rs).
const (
	flagDeletionFiles   = 1
	flagStableRowIDs    = 2
	flagTableConfig     = 8
	flagBasePaths       = 16
	flagNoTxnFile       = 32
	flagUnknownFromHere = 64
)

// CommitKind selects the transaction a commit records.
type CommitKind int

const (
	// Append adds the request's files as new fragments (a Lance Append
	// transaction); the config delta is applied in the same manifest.
	Append CommitKind = iota + 1
	// ConfigOnly changes only the config map (a Lance UpdateConfig
	// transaction), as a fence does.
	ConfigOnly
	// Rewrite replaces the fragments Replace names, which must be adjacent
	// in the parent, by the request's files (a Lance Rewrite transaction: a
	// compaction). The new fragments take the place of the first replaced
	// one, so the rows keep their order.
	Rewrite
)

// Hooks are named points of the commit path where a test or the
// materializer may inject a fault or pause. A nil hook costs nothing. An
// error from BeforeLink aborts the attempt with nothing committed; an error
// from AfterLinkBeforeDirSync is reported as ErrCommitUnknown (the manifest
// is linked but not yet durable).
type Hooks struct {
	BeforeLink             func(ctx context.Context, version uint64) error
	AfterLinkBeforeDirSync func(ctx context.Context, version uint64) error
}

// CommitRequest is one commit attempt against an exact parent version.
type CommitRequest struct {
	// ParentVersion is the version the attempt is built on; the commit
	// creates ParentVersion+1 or fails.
	ParentVersion uint64
	// Kind is Append or ConfigOnly.
	Kind CommitKind
	// Files become one fragment each, in order, with ids after the parent's
	// max_fragment_id. Only for Append, which needs at least one.
	Files []Descriptor
	// Replace are the ids of the fragments a Rewrite replaces.
	Replace []uint64
	// ConfigSet are config keys set in the new version; ConfigDelete are
	// keys removed. Both are applied on top of the parent's config.
	ConfigSet    map[string]string
	ConfigDelete []string
	// TxnID is recorded as the transaction uuid; a random uuid if empty.
	// Use a stable id per logical commit so FindTransaction can resolve an
	// unknown outcome.
	TxnID string
	// Check, if set, runs against the parent manifest before anything is
	// written; its error aborts the attempt and is returned as is.
	Check func(parent *Manifest) error
	// Now stamps the manifest (time.Now if nil).
	Now func() time.Time
}

// CommitResult describes a successful commit.
type CommitResult struct {
	Version     uint64   `json:"version"`
	TxnID       string   `json:"txn_id"`
	FragmentIDs []uint64 `json:"fragment_ids,omitempty"`
}

// Commit makes one attempt to create version req.ParentVersion+1 built from
// that exact parent: its fragments, max_fragment_id and config, plus the
// request's files and config delta. It returns ErrCommitConflict when the
// version already exists (nothing of this attempt is visible; retry on the
// new latest, which runs Check again), ErrCommitUnknown when the manifest
// was linked but the commit could not be confirmed durable (resolve with
// FindTransaction), and the Check's own error unchanged. Cancellation is
// honoured before the link; once linked, the commit completes.
func (d *Dataset) Commit(ctx context.Context, req CommitRequest) (*CommitResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	parent, err := d.Manifest(req.ParentVersion)
	if err != nil {
		return nil, err
	}
	if req.Check != nil {
		if err := req.Check(parent); err != nil {
			return nil, err
		}
	}
	next, txn, fragIDs, err := d.buildNext(parent, &req)
	if err != nil {
		return nil, err
	}
	var index []byte
	if parent.pb.IndexSection != nil {
		if index, err = readSection(parent.raw, *parent.pb.IndexSection); err != nil {
			return nil, fmt.Errorf("%s: index section: %w", parent.Path, err)
		}
	}
	// Version N+1 takes the naming of the N actually read (rule 23): two
	// writers on one parent then create one key, and the conditional
	// create lets exactly one of them win.
	file := encodeManifestFile(next, txn.Encode(), index)
	err = d.putManifest(ctx, next.Version, parent.V2Naming, file)
	if errors.Is(err, ErrCommitUnknown) && !errors.Is(err, durable.ErrSyncFailed) {
		return nil, d.resolveReused(ctx, parent, next.Version, req.TxnID, err)
	}
	if err != nil {
		return nil, err
	}
	if err := d.confirmFresh(ctx, parent, next.Version, req.TxnID); err != nil {
		return nil, err
	}
	return &CommitResult{Version: next.Version, TxnID: req.TxnID, FragmentIDs: fragIDs}, nil
}

func validateRequest(req *CommitRequest) error {
	switch req.Kind {
	case Append:
		if len(req.Files) == 0 {
			return fmt.Errorf("append commit without files: %w", errs.ErrInvalid)
		}
	case Rewrite:
		if len(req.Files) == 0 || len(req.Replace) == 0 {
			return fmt.Errorf("rewrite commit of %d fragments into %d files: %w", len(req.Replace), len(req.Files), errs.ErrInvalid)
		}
	case ConfigOnly:
		if len(req.Files) > 0 {
			return fmt.Errorf("config-only commit with %d files: %w", len(req.Files), errs.ErrInvalid)
		}
	default:
		return fmt.Errorf("commit kind %d: %w", req.Kind, errs.ErrInvalid)
	}
	for _, k := range req.ConfigDelete {
		if _, ok := req.ConfigSet[k]; ok {
			return fmt.Errorf("config key %q both set and deleted: %w", k, errs.ErrInvalid)
		}
	}
	if req.TxnID == "" {
		req.TxnID = uuid.NewString()
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	return nil
}

// buildNext derives the manifest of ParentVersion+1 from a fresh decode of
// the parent's bytes, so nothing of an earlier attempt leaks in.
func (d *Dataset) buildNext(parent *Manifest, req *CommitRequest) (*lancepb.Manifest, *lancepb.Transaction, []uint64, error) {
	if parent.pb.WriterFeatureFlags >= flagUnknownFromHere {
		return nil, nil, nil, fmt.Errorf("%s: writer feature flags %#x include some walctl does not know: %w", parent.Path, parent.pb.WriterFeatureFlags, ErrUnsupported)
	}
	body, err := readSection(parent.raw, binaryTail(parent.raw))
	if err != nil {
		return nil, nil, nil, err
	}
	next, err := lancepb.DecodeManifest(body)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w: %w", parent.Path, ErrCorruptManifest, err)
	}
	txn := &lancepb.Transaction{ReadVersion: parent.Version, UUID: req.TxnID}
	var ids []uint64
	switch req.Kind {
	case Rewrite:
		if ids, err = d.rewrite(parent, next, txn, req); err != nil {
			return nil, nil, nil, err
		}
	case Append:
		if next.ReaderFeatureFlags&flagStableRowIDs != 0 {
			return nil, nil, nil, fmt.Errorf("%s: table uses stable row ids: %w", parent.Path, ErrUnsupported)
		}
		frags, err := d.newFragments(parent, req.Files)
		if err != nil {
			return nil, nil, nil, err
		}
		next.Fragments = append(next.Fragments, frags...)
		for _, f := range frags {
			ids = append(ids, f.ID)
		}
		max := uint32(frags[len(frags)-1].ID)
		next.MaxFragmentID = &max
		txn.Op, txn.AppendFragments = lancepb.OpAppend, frags
	default:
		if max, ok := parent.MaxFragmentID(); ok {
			m := uint32(max)
			next.MaxFragmentID = &m
		}
		txn.Op, txn.ConfigUpserts, txn.ConfigDeletes = lancepb.OpUpdateConfig, req.ConfigSet, req.ConfigDelete
	}
	for k, v := range req.ConfigSet {
		next.Config[k] = v
	}
	for _, k := range req.ConfigDelete {
		delete(next.Config, k)
	}
	next.Version = parent.Version + 1
	now := req.Now()
	next.TimestampSeconds, next.TimestampNanos = now.Unix(), int32(now.Nanosecond())
	next.WriterLibrary, next.WriterVersion = writerLibrary, writerVersion
	setFeatureFlags(next)
	return next, txn, ids, nil
}

func binaryTail(raw []byte) uint64 {
	if len(raw) < 16 {
		return uint64(len(raw))
	}
	return leU64(raw[len(raw)-16:])
}

// setFeatureFlags recomputes the flags as Lance's apply_feature_flags does.
func setFeatureFlags(m *lancepb.Manifest) {
	var r, w uint64
	for _, f := range m.Fragments {
		if f.HasDeletionFile {
			r, w = r|flagDeletionFiles, w|flagDeletionFiles
		}
		if f.HasRowIDs {
			r, w = r|flagStableRowIDs, w|flagStableRowIDs
		}
	}
	if len(m.Config) > 0 {
		w |= flagTableConfig
	}
	for _, raw := range m.Other {
		if len(raw) > 0 && raw[0] == 18<<3|2 { // base_paths
			r, w = r|flagBasePaths, w|flagBasePaths
			break
		}
	}
	m.ReaderFeatureFlags, m.WriterFeatureFlags = r, w|flagNoTxnFile
}

// newFragments turns descriptors into fragments with ids after the parent's
// max_fragment_id, checking each file against the parent's schema and
// format and its size on disk.
func (d *Dataset) newFragments(parent *Manifest, files []Descriptor) ([]lancepb.Fragment, error) {
	schema, err := parent.Schema()
	if err != nil {
		return nil, err
	}
	fv, err := parent.FileVersion()
	if err != nil {
		return nil, err
	}
	major, minor := fv.ManifestNumbers()
	want := schema.FieldIDs()
	next := uint64(0)
	if max, ok := parent.MaxFragmentID(); ok {
		next = max + 1
	}
	cols := make([]int32, len(want))
	for i := range cols {
		cols[i] = int32(i)
	}
	seen := map[string]bool{}
	var out []lancepb.Fragment
	for _, desc := range files {
		p, err := d.dataPath(desc.Path)
		if err != nil {
			return nil, err
		}
		if seen[desc.Path] {
			return nil, fmt.Errorf("%s listed twice: %w", desc.Path, errs.ErrInvalid)
		}
		seen[desc.Path] = true
		if desc.FileMajor != major || desc.FileMinor != minor {
			return nil, fmt.Errorf("%s is format %d.%d, table %s uses %s: %w", desc.Path, desc.FileMajor, desc.FileMinor, d.root, fv, errs.ErrInvalid)
		}
		if !slices.Equal(desc.FieldIDs, want) {
			return nil, fmt.Errorf("%s has field ids %v, version %d's schema has %v: %w", desc.Path, desc.FieldIDs, parent.Version, want, errs.ErrInvalid)
		}
		if desc.Rows == 0 {
			return nil, fmt.Errorf("%s has no rows: %w", desc.Path, errs.ErrInvalid)
		}
		st, err := d.store.Stat(context.Background(), p)
		if err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				return nil, fmt.Errorf("%s: %w", d.store.Join(p), ErrMissingFile)
			}
			return nil, err
		}
		if uint64(st.Size) != desc.Size {
			return nil, fmt.Errorf("%s: size %d, descriptor says %d: %w", d.store.Join(p), st.Size, desc.Size, ErrCorruptFile)
		}
		out = append(out, lancepb.Fragment{
			ID: next, PhysicalRows: desc.Rows,
			Files: []lancepb.DataFile{{
				Path: strings.TrimPrefix(desc.Path, dataDir+"/"), Fields: want, ColumnIndices: cols,
				Major: major, Minor: minor, SizeBytes: desc.Size,
			}},
		})
		next++
	}
	return out, nil
}

// putManifest is put-if-not-exists of version v, named as its parent is,
// through the store: on a local directory a temp file, fsync, link(2) to
// the final name (EEXIST = lost race), fsync of _versions; on S3 a PUT
// with If-None-Match: * (412 or 409 = lost race). A failure after the manifest may have become visible
// (a failed fsync after the link, a timeout or 5xx after the PUT was sent)
// is ErrCommitUnknown: resolve it by re-reading (FindTransaction), never
// by writing again.
func (d *Dataset) putManifest(ctx context.Context, v uint64, v2 bool, data []byte) error {
	key := versionsDir + "/" + manifestName(v, v2)
	h := &objstore.Hooks{}
	if d.Hooks.BeforeLink != nil {
		h.BeforePublish = func(ctx context.Context) error { return d.Hooks.BeforeLink(ctx, v) }
	}
	if d.Hooks.AfterLinkBeforeDirSync != nil {
		h.AfterPublish = func(ctx context.Context) error { return d.Hooks.AfterLinkBeforeDirSync(ctx, v) }
	}
	err := d.store.PutIfAbsent(ctx, key, data, h)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objstore.ErrExists):
		return fmt.Errorf("version %d of %s: %w", v, d.root, ErrCommitConflict)
	case errors.Is(err, objstore.ErrUnknownOutcome):
		return fmt.Errorf("version %d of %s: %w: %w", v, d.root, ErrCommitUnknown, err)
	}
	return fmt.Errorf("write manifest of version %d of %s: %w", v, d.root, err)
}

// commitInitial writes version 1 of a new dataset: the schema, no
// fragments, an Overwrite transaction.
func (d *Dataset) commitInitial(s *Schema, opts CreateOptions) error {
	txnID := opts.TxnID
	if txnID == "" {
		txnID = uuid.NewString()
	}
	cfg := map[string]string{}
	for k, v := range opts.Config {
		cfg[k] = v
	}
	now := time.Now()
	m := &lancepb.Manifest{
		Fields: s.Fields, Version: 1, WriterLibrary: writerLibrary, WriterVersion: writerVersion,
		TimestampSeconds: now.Unix(), TimestampNanos: int32(now.Nanosecond()),
		FileFormat: "lance", FormatVersion: opts.FileVersion.String(), Config: cfg,
	}
	setFeatureFlags(m)
	txn := &lancepb.Transaction{UUID: txnID, Op: lancepb.OpOverwrite, OverwriteFields: s.Fields, OverwriteConfig: cfg}
	err := d.putManifest(context.Background(), 1, true, encodeManifestFile(m, txn.Encode(), nil))
	if errors.Is(err, ErrCommitConflict) {
		return fmt.Errorf("%s: %w", d.root, ErrDatasetExists)
	}
	return err
}

// rewrite replaces req.Replace (adjacent fragments of the parent, none with
// a deletion file) in next by fragments of req.Files, in place.
func (d *Dataset) rewrite(parent *Manifest, next *lancepb.Manifest, txn *lancepb.Transaction, req *CommitRequest) ([]uint64, error) {
	frags, err := d.newFragments(parent, req.Files)
	if err != nil {
		return nil, err
	}
	first := -1
	for i, f := range next.Fragments {
		if f.ID == req.Replace[0] {
			first = i
		}
	}
	if first < 0 || first+len(req.Replace) > len(next.Fragments) {
		return nil, fmt.Errorf("rewrite: fragment %d not in version %d: %w", req.Replace[0], parent.Version, ErrCommitConflict)
	}
	old := next.Fragments[first : first+len(req.Replace)]
	for i, f := range old {
		if f.ID != req.Replace[i] || f.HasDeletionFile {
			return nil, fmt.Errorf("rewrite: fragments %v are no longer adjacent and whole in version %d: %w", req.Replace, parent.Version, ErrCommitConflict)
		}
	}
	txn.Op, txn.RewriteOld, txn.RewriteNew = lancepb.OpRewrite, slices.Clone(old), frags
	next.Fragments = slices.Concat(next.Fragments[:first:first], frags, next.Fragments[first+len(req.Replace):])
	max := uint32(frags[len(frags)-1].ID)
	next.MaxFragmentID = &max
	ids := make([]uint64, len(frags))
	for i, f := range frags {
		ids[i] = f.ID
	}
	return ids, nil
}

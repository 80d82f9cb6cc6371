// Package lineage tells where a table's rows came from: one entry per Lance
// version (`walctl table history`: fence, publication, foreign append,
// compaction, …, with the walctl epoch, plan, WAL ranges and committer) and
// the version and data file that hold a given WAL entry (`walctl table
// locate`). It reads only: manifests, and walctl's records under _walctl/.
package lineage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
)

// Operations a version can record.
const (
	OpCreate        = "create"         // version 1: the schema, no rows
	OpFence         = "fence"          // a walctl fence: a new publisher epoch
	OpPublication   = "publication"    // walctl published a plan: rows and watermarks
	OpForeignAppend = "foreign-append" // another writer appended rows
	OpCompaction    = "compaction"     // fragments rewritten (official optimize, walctl table compact)
	OpOther         = "other"          // anything else (delete, index, config …): see Transaction
)

// Version is the lineage of one Lance version.
type Version struct {
	Version   uint64    `json:"version"`
	Time      time.Time `json:"time"`
	Operation string    `json:"operation"`
	// Transaction is the Lance transaction's operation ("append",
	// "rewrite", "update_config", …; "" when the version records none).
	Transaction string `json:"transaction"`
	Epoch       uint64 `json:"epoch"`
	Plan        string `json:"plan"`
	// Ranges are the WAL positions this version published, per shard.
	Ranges []publish.Range `json:"ranges"`
	// Rows and Bytes are those of the fragments this version added.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Committer is walctl's record of who committed (nil for a foreign
	// writer, or a walctl version older than the record).
	Committer *publish.Committer `json:"committer"`
	// Writer is the library that wrote the manifest, e.g. "walctl 0.1.0".
	Writer string `json:"writer"`

	added []uint64 // fragment ids added
}

// Options select the versions History returns.
type Options struct {
	// Since drops versions committed before it (zero: none dropped).
	Since time.Time
	// Limit keeps the newest Limit versions (0: all).
	Limit int
}

// History returns the lineage of table's versions under root, oldest first.
// A version whose manifest is gone (cleaned up) is skipped; the next one is
// compared with the last one read. It reads only; cancellation returns ctx's
// error.
func History(ctx context.Context, root objstore.Store, table string, opts Options) ([]Version, error) {
	ds, err := lance.OpenStore(root.Sub(table + ".lance"))
	if err != nil {
		return nil, err
	}
	all, err := history(ctx, ds)
	if err != nil {
		return nil, err
	}
	out := []Version{}
	for _, v := range all {
		if !v.Time.Before(opts.Since) {
			out = append(out, v)
		}
	}
	if opts.Limit > 0 && len(out) > opts.Limit {
		out = out[len(out)-opts.Limit:]
	}
	return out, nil
}

func history(ctx context.Context, ds *lance.Dataset) ([]Version, error) {
	vs, err := ds.Versions()
	if err != nil {
		return nil, err
	}
	var out []Version
	var prev *lance.Manifest
	for _, vi := range vs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := ds.Manifest(vi.Version)
		if errors.Is(err, lance.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		v, err := describe(ds, prev, m)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		prev = m
	}
	return out, nil
}

// describe compares version m with prev (nil for the first one read).
func describe(ds *lance.Dataset, prev, m *lance.Manifest) (Version, error) {
	st, err := publish.ParseState(m.Config)
	if err != nil {
		return Version{}, fmt.Errorf("version %d: %w", m.Version, err)
	}
	v := Version{Version: m.Version, Time: m.Timestamp.UTC(), Epoch: st.Epoch, Plan: st.Plan, Ranges: []publish.Range{},
		Writer: m.WriterLibrary + " " + m.WriterVersion}
	if txn, ok, err := m.Transaction(ds.Store()); err != nil {
		return Version{}, err
	} else if ok {
		v.Transaction = txn.Operation
	}
	if c, ok := publish.ParseCommitter(m.Config); ok && m.WriterLibrary == "walctl" {
		v.Committer = &c // another writer carries walctl's keys over unchanged
	}
	pst := publish.State{Watermarks: publish.Watermarks{}}
	had := map[uint64]bool{}
	if prev != nil {
		if pst, err = publish.ParseState(prev.Config); err != nil {
			return Version{}, fmt.Errorf("version %d: %w", prev.Version, err)
		}
		for _, f := range prev.Fragments {
			had[f.ID] = true
		}
	}
	for _, f := range m.Fragments {
		if had[f.ID] {
			continue
		}
		v.added = append(v.added, f.ID)
		v.Rows += int64(f.PhysicalRows)
		for _, df := range f.Files {
			v.Bytes += int64(df.SizeBytes)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(st.Watermarks)) {
		if w, pw := st.Watermarks[s], pst.Watermarks[s]; w > pw {
			v.Ranges = append(v.Ranges, publish.Range{Shard: s, From: pw + 1, To: w})
		}
	}
	v.Operation = classify(prev, v, st, pst)
	if v.Committer != nil && v.Operation != OpFence && v.Operation != OpPublication && v.Operation != OpCompaction {
		v.Committer = nil // a walctl commit that records no committer of its own
	}
	return v, nil
}

// classify names what a version did from its transaction and walctl's keys.
func classify(prev *lance.Manifest, v Version, st, pst publish.State) string {
	switch {
	case prev == nil && v.Transaction == "overwrite":
		return OpCreate
	case v.Transaction == "rewrite":
		return OpCompaction
	case v.Transaction == "append" && st.Plan != pst.Plan && st.Plan != "":
		return OpPublication
	case v.Transaction == "append":
		return OpForeignAppend
	case v.Transaction == "update_config" && st.Epoch > pst.Epoch:
		return OpFence
	}
	return OpOther
}

// FragmentOrigins maps each fragment id of the latest version to the
// operation of the version that added it (OpForeignAppend, OpPublication,
// OpCompaction …). A fragment whose adding version is gone maps to "".
func FragmentOrigins(ctx context.Context, ds *lance.Dataset) (map[uint64]string, error) {
	vs, err := history(ctx, ds)
	if err != nil {
		return nil, err
	}
	origin := map[uint64]string{}
	for _, v := range vs {
		for _, id := range v.added {
			origin[id] = v.Operation
		}
	}
	return origin, nil
}

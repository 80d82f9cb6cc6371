package publish

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/lance"
	"github.com/walctl/walctl/internal/core/objstore"
)

// CleanResult describes `walctl table clean`.
type CleanResult struct {
	Table  string    `json:"table"`
	Cutoff time.Time `json:"cutoff"`
	// VersionsRemoved are versions committed before Cutoff (never the
	// latest); VersionsKept the retained ones.
	VersionsRemoved []uint64 `json:"versions_removed"`
	VersionsKept    int      `json:"versions_kept"`
	// FilesRemoved are data and deletion files no retained version
	// references; RecordsRemoved walctl's records of retired plans,
	// descriptor sets and compactions none of whose files is referenced.
	FilesRemoved   []string `json:"files_removed"`
	RecordsRemoved []string `json:"records_removed"`
	// UploadsAborted are the keys of multipart uploads (S3) that dead
	// attempts left open under data/, started before Cutoff.
	UploadsAborted []string `json:"uploads_aborted"`
}

// Clean removes, under the session's claim (no publisher of this table
// runs meanwhile), what no retained version needs: versions committed more
// than olderThan ago (never the latest), then data and deletion files older
// than that which no retained version references, and walctl's records
// (retired plans, descriptor sets, compaction records) of which no file is
// referenced any more, and the multipart uploads dead attempts left open
// (started before the cutoff; none of this table's attempts runs while the
// claim is held). Files of a pinned plan's recorded attempts and walctl's
// digests are always kept. Cancellation stops between deletions;
// what is removed stays removed, nothing referenced is touched.
func (s *Session) Clean(ctx context.Context, olderThan time.Duration) (*CleanResult, error) {
	if err := s.claim.Valid(ctx); err != nil {
		return nil, err
	}
	ds, err := s.dataset(ctx)
	if err != nil {
		return nil, err
	}
	res := &CleanResult{Table: s.table, Cutoff: s.now().Add(-olderThan).UTC(), VersionsRemoved: []uint64{}, FilesRemoved: []string{}, RecordsRemoved: []string{}, UploadsAborted: []string{}}
	kept, err := s.expireVersions(ctx, ds, res)
	if err != nil {
		return res, err
	}
	res.VersionsKept = len(kept)
	refs := referenced(kept)
	keep, err := s.keepRecords(ctx, refs, res)
	if err != nil {
		return res, err
	}
	if err := s.removeFiles(ctx, "data", refs, keep, res); err != nil {
		return res, err
	}
	if err := s.removeFiles(ctx, "_deletions", refs, keep, res); err != nil {
		return res, err
	}
	res.UploadsAborted, err = s.abortUploads(ctx, res.Cutoff)
	return res, err
}

// expireVersions removes the versions older than the cutoff, the latest
// excepted, and returns the manifests of those kept.
func (s *Session) expireVersions(ctx context.Context, ds *lance.Dataset, res *CleanResult) ([]*lance.Manifest, error) {
	vs, err := ds.Versions()
	if err != nil {
		return nil, err
	}
	var kept []*lance.Manifest
	for i, vi := range vs {
		m, err := ds.Manifest(vi.Version)
		if err != nil {
			return nil, err
		}
		if i < len(vs)-1 && !m.Timestamp.IsZero() && m.Timestamp.Before(res.Cutoff) {
			if err := s.claim.Err(); err != nil {
				return nil, err
			}
			if err := ds.RemoveVersion(ctx, vi.Version); err != nil {
				return nil, err
			}
			res.VersionsRemoved = append(res.VersionsRemoved, vi.Version)
			continue
		}
		kept = append(kept, m)
	}
	return kept, nil
}

// referenced lists the data files (data/…) and deletion files
// (_deletions/…) the manifests reference.
func referenced(ms []*lance.Manifest) map[string]bool {
	refs := map[string]bool{}
	for _, m := range ms {
		for _, f := range m.Fragments {
			for _, df := range f.Files {
				refs["data/"+df.Path] = true
			}
			if f.HasDeletionFile && f.Deletion.Type == 0 {
				refs[fmt.Sprintf("_deletions/%d-%d-%d.arrow", f.ID, f.Deletion.ReadVersion, f.Deletion.ID)] = true
			} else if f.HasDeletionFile {
				refs[fmt.Sprintf("_deletions/%d-%d-%d.bin", f.ID, f.Deletion.ReadVersion, f.Deletion.ID)] = true
			}
		}
	}
	return refs
}

// keepRecords removes walctl's records none of whose files is referenced
// (retired plans older than the cutoff, descriptor sets of retired plans,
// compaction records) and returns the data files the kept records still
// need: the attempts of pinned plans (not committed yet).
func (s *Session) keepRecords(ctx context.Context, refs map[string]bool, res *CleanResult) (map[string]bool, error) {
	keep := map[string]bool{}
	pinned := map[string]bool{}
	plans, err := s.store.Plans()
	if err != nil {
		return nil, err
	}
	for _, p := range plans {
		pinned[p.ID] = true
	}
	lineage, err := s.cleanCompactions(ctx, refs, res)
	if err != nil {
		return nil, err
	}
	attempts, err := s.store.AllAttempts()
	if err != nil {
		return nil, err
	}
	for _, a := range attempts {
		used := false
		for _, f := range a.Files {
			used = used || refs[f.Descriptor.Path] || lineage[f.Descriptor.Path]
			if pinned[a.Plan] {
				keep[f.Descriptor.Path] = true
			}
		}
		if !used && !pinned[a.Plan] && a.PreparedAt.Before(res.Cutoff) {
			if err := s.removeRecord(ctx, a.src.key, res); err != nil {
				return nil, err
			}
		}
	}
	return keep, s.removeRetiredPlans(ctx, res)
}

// cleanCompactions removes the compaction records whose file no retained
// version references, directly or through a kept compaction, and returns
// the source files the kept ones name: the records that map their rows to
// WAL positions (descriptor sets, older compactions) stay.
func (s *Session) cleanCompactions(ctx context.Context, refs map[string]bool, res *CleanResult) (map[string]bool, error) {
	comps, err := s.store.Compactions(ctx)
	if err != nil {
		return nil, err
	}
	needed := map[string]bool{}
	for k := range refs {
		needed[k] = true
	}
	kept := map[string]bool{}
	for grew := true; grew; {
		grew = false
		for _, c := range comps {
			if needed[c.File.Path] && !kept[c.ID] {
				kept[c.ID], grew = true, true
				for _, src := range c.Sources {
					needed["data/"+src.Path] = true
				}
			}
		}
	}
	for _, c := range comps {
		if !kept[c.ID] {
			if err := s.removeRecord(ctx, compactionsDir+"/"+c.ID+".json", res); err != nil {
				return nil, err
			}
		}
	}
	return needed, nil
}

// removeRetiredPlans removes retired plan records older than the cutoff.
func (s *Session) removeRetiredPlans(ctx context.Context, res *CleanResult) error {
	entries, err := s.store.st.List(ctx, plansDir+"/retired")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Key, ".json") && e.Modified.Before(res.Cutoff) {
			if err := s.removeRecord(ctx, e.Key, res); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Session) removeRecord(ctx context.Context, key string, res *CleanResult) error {
	if err := s.claim.Err(); err != nil {
		return err
	}
	if err := s.store.st.Delete(ctx, key); err != nil {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	res.RecordsRemoved = append(res.RecordsRemoved, key)
	if strings.HasSuffix(key, ".json") && !strings.HasSuffix(key, ".retired.json") && strings.HasPrefix(key, attemptsDir) {
		// The attempt's retirement marker goes with it, if any.
		marker := strings.TrimSuffix(key, ".json") + ".retired.json"
		if _, err := s.store.st.Stat(ctx, marker); err == nil {
			return s.removeRecord(ctx, marker, res)
		}
	}
	return nil
}

// removeFiles removes the files under dir older than the cutoff that no
// retained version references and no kept record needs.
func (s *Session) removeFiles(ctx context.Context, dir string, refs, keep map[string]bool, res *CleanResult) error {
	entries, err := s.store.st.List(ctx, dir)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	for _, e := range entries {
		key := dir + "/" + path.Base(e.Key)
		if refs[key] || keep[key] || !e.Modified.Before(res.Cutoff) {
			continue
		}
		if err := s.claim.Err(); err != nil {
			return err
		}
		if err := s.store.st.Delete(ctx, key); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove %s: %w", key, err)
		}
		res.FilesRemoved = append(res.FilesRemoved, key)
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }

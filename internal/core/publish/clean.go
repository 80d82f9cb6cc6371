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
	Table string `json:"table"`
	// Epoch is the publisher epoch the clean fenced the table at before it
	// removed anything.
	Epoch uint64 `json:"epoch"`
	// MinAge is MinCleanAge of the claim's TTL: an olderThan below it is
	// raised to it.
	MinAge time.Duration `json:"min_age_ns"`
	// Cutoff is now (after the fence) minus the larger of olderThan and
	// MinAge: only what is older is removed.
	Cutoff time.Time `json:"cutoff"`
	// VersionsRemoved are the oldest versions, each committed before
	// Cutoff, up to the first that is kept (never the latest two);
	// VersionsKept counts the retained ones.
	VersionsRemoved []uint64 `json:"versions_removed"`
	VersionsKept    int      `json:"versions_kept"`
	// FilesRemoved are data and deletion files no retained version
	// references; RecordsRemoved walctl's records of retired plans,
	// descriptor sets and compactions none of whose files is referenced.
	FilesRemoved   []string `json:"files_removed"`
	RecordsRemoved []string `json:"records_removed"`
	// UploadsAborted are the keys of multipart uploads (S3) that dead
	// attempts left open under data/: all of them, as every owner's fence
	// aborts them (no earlier attempt can be published once the clean has
	// fenced).
	UploadsAborted []string `json:"uploads_aborted"`
}

// keepLatest is how many of the newest versions a clean always keeps: the
// latest (its own fence) and the one below it, the parent of that fence,
// which a deposed holder whose check passed on it would target.
const keepLatest = 2

// MinCleanAge is the youngest age Clean removes anything at, for claims of
// the given TTL: twice the TTL. A deposed holder that passed its checks on
// some version stops acting within a TTL of its last keep-alive (the
// wall-time rule); the second TTL covers clock skew between the committer
// that stamped a version and the cleaner that reads the stamp. Versions,
// files and records younger than that are what such a holder could still
// commit onto or reference, so they stay whatever olderThan says.
func MinCleanAge(claimTTL time.Duration) time.Duration { return 2 * claimTTL }

// Clean removes, under the session's claim, what no retained version
// needs (DESIGN.md §3 rule 23: a version number is created once, ever, and
// no path deletes a version a live holder could still commit onto). It
// aborts the multipart uploads dead attempts left open (S3), then fences
// the table under the claim (a new epoch in the WAL and a fence version),
// so a deposed publisher or compactor whose checks passed on an older
// version fails: its link targets a version number that now exists. Then
// it removes the oldest versions committed more than olderThan ago (raised
// to MinCleanAge of the claim's TTL), oldest first and only up to the
// first one kept, and never the latest two; then data and deletion files
// older than that which no retained version references, and walctl's
// records (retired plans, descriptor sets, compaction records) of which no
// file is referenced any more. Files of a pinned plan's recorded attempts
// and walctl's digests are always kept. A newer epoch met while fencing is
// ErrFenced, and nothing is removed. Cancellation stops between deletions;
// what is removed stays removed, nothing referenced is touched.
func (s *Session) Clean(ctx context.Context, olderThan time.Duration) (*CleanResult, error) {
	res := &CleanResult{Table: s.table, MinAge: MinCleanAge(s.claim.TTL()), VersionsRemoved: []uint64{}, FilesRemoved: []string{}, RecordsRemoved: []string{}, UploadsAborted: []string{}}
	if err := s.p.stopped.check(s.table); err != nil {
		return res, err
	}
	err := s.clean(ctx, olderThan, res)
	return res, s.p.stopped.note(s.table, err)
}

func (s *Session) clean(ctx context.Context, olderThan time.Duration, res *CleanResult) error {
	if err := s.claim.Valid(ctx); err != nil {
		return err
	}
	// The fence would abort the open uploads silently: abort them here, to
	// report them. An attempt whose upload this interrupts can no more be
	// published than after the fence: its file never completes.
	aborted, abortErr := s.abortUploads(ctx, time.Time{})
	res.UploadsAborted = aborted
	if err := s.ensureFenced(ctx); err != nil {
		return errors.Join(err, abortErr)
	}
	res.Epoch = s.epoch
	ds, err := s.dataset(ctx)
	if err != nil {
		return err
	}
	// The cutoff is taken after the fence: the fence is the version every
	// deposed holder now collides with, whatever it read before.
	res.Cutoff = s.now().Add(-max(olderThan, res.MinAge)).UTC()
	kept, err := s.expireVersions(ctx, ds, res)
	if err != nil {
		return err
	}
	res.VersionsKept = len(kept)
	// Validated again, with the storage stop (rule 24), before any file
	// is removed.
	if err := s.claim.Valid(ctx); err != nil {
		return err
	}
	refs := referenced(kept)
	keep, err := s.keepRecords(ctx, refs, res)
	if err != nil {
		return err
	}
	if err := s.removeFiles(ctx, "data", refs, keep, res); err != nil {
		return err
	}
	if err := s.removeFiles(ctx, "_deletions", refs, keep, res); err != nil {
		return err
	}
	return abortErr
}

// expireVersions removes the oldest versions committed before the cutoff,
// oldest first, up to the first one that stays (one too young, one with no
// timestamp, or one of the latest keepLatest), and returns the manifests
// of those kept. Removing only a prefix, in order, keeps a version's parent
// from outliving it, which is what lets a commit that fills a freed number
// notice (lance.ErrVersionReused).
func (s *Session) expireVersions(ctx context.Context, ds *lance.Dataset, res *CleanResult) ([]*lance.Manifest, error) {
	vs, err := ds.Versions()
	if err != nil {
		return nil, err
	}
	var kept []*lance.Manifest
	expiring := true
	for i, vi := range vs {
		m, err := ds.Manifest(vi.Version)
		if err != nil {
			return nil, err
		}
		expiring = expiring && i < len(vs)-keepLatest && !m.Timestamp.IsZero() && m.Timestamp.Before(res.Cutoff)
		if !expiring {
			kept = append(kept, m)
			continue
		}
		if err := s.claim.Err(); err != nil {
			return nil, err
		}
		if err := ds.RemoveVersion(ctx, vi.Version); err != nil {
			return nil, err
		}
		res.VersionsRemoved = append(res.VersionsRemoved, vi.Version)
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

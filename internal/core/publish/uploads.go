package publish

import (
	"context"
	"errors"
	"time"

	"github.com/walctl/walctl/internal/core/objstore"
)

// abortDeadUploads aborts the multipart uploads still open under the
// table's data/ once this session's fence is in place. No earlier owner can
// commit after the fence (rule 4), and this session has not started a file
// yet, so each of them belongs to an attempt that can never be published: a
// preparer that died or was fenced mid-upload. Aborting frees its parts,
// which the store would otherwise keep (and bill) silently. A failure is
// logged, never fatal: the uploads are then left for the next owner. A
// local store has no uploads.
func (s *Session) abortDeadUploads(ctx context.Context) {
	if _, err := s.abortUploads(ctx, time.Time{}); err != nil {
		s.log.Warn("aborting abandoned uploads failed", "error", err)
	}
}

// abortUploads aborts the multipart uploads open under the table's data/
// that the store started before cutoff (every one if cutoff is zero) and
// returns their keys. Aborting one never loses a record: a descriptor set
// is recorded only once all its files' uploads completed, so the attempt
// it belonged to fails and a later one writes new files (rule 7). It tries
// every upload and returns the first failure.
func (s *Session) abortUploads(ctx context.Context, cutoff time.Time) ([]string, error) {
	aborted := []string{}
	up, ok := s.p.TableStore(s.table).(objstore.Uploader)
	if !ok {
		return aborted, nil
	}
	uploads, err := up.Uploads(ctx, "data")
	if err != nil {
		return aborted, err
	}
	var errs []error
	for _, u := range uploads {
		if !cutoff.IsZero() && !u.Initiated.IsZero() && !u.Initiated.Before(cutoff) {
			continue
		}
		if err := up.AbortUpload(ctx, u); err != nil {
			errs = append(errs, err)
			continue
		}
		s.log.Info("aborted an abandoned upload of a dead attempt", "key", u.Key)
		aborted = append(aborted, u.Key)
	}
	return aborted, errors.Join(errs...)
}

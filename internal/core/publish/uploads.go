package publish

import (
	"context"

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
	up, ok := s.p.TableStore(s.table).(objstore.Uploader)
	if !ok {
		return
	}
	uploads, err := up.Uploads(ctx, "data")
	if err != nil {
		s.log.Warn("listing abandoned uploads failed", "error", err)
		return
	}
	for _, u := range uploads {
		if err := up.AbortUpload(ctx, u); err != nil {
			s.log.Warn("aborting an abandoned upload failed", "key", u.Key, "error", err)
			continue
		}
		s.log.Info("aborted an abandoned upload of a dead attempt", "key", u.Key)
	}
}

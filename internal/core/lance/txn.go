package lance

import (
	"context"
	"errors"
	"fmt"

	"github.com/walctl/walctl/internal/core/errs"
)

// FindTransaction looks for the version whose transaction uuid is txnID
// among the versions after `after` (pass the attempt's parent version). It is
// how a caller resolves ErrCommitUnknown, or an ErrCommitConflict on a retry
// of a link that had in fact succeeded: found means committed, as version.
// It reads only.
func (d *Dataset) FindTransaction(txnID string, after uint64) (version uint64, found bool, err error) {
	if txnID == "" {
		return 0, false, fmt.Errorf("empty transaction id: %w", errs.ErrInvalid)
	}
	vs, err := d.Versions()
	if err != nil {
		return 0, false, err
	}
	for _, vi := range vs {
		if vi.Version <= after {
			continue
		}
		m, err := d.Manifest(vi.Version)
		if err != nil {
			return 0, false, err
		}
		txn, ok, err := m.Transaction(d.store)
		if err != nil {
			return 0, false, err
		}
		if ok && txn.UUID == txnID {
			return vi.Version, true, nil
		}
	}
	return 0, false, nil
}

// CommitLatest commits req on the latest version, retrying on
// ErrCommitConflict up to attempts times. Each attempt re-reads the latest
// version and runs req.Check on it, so a retry whose check fails on the new
// parent is refused with the check's error. An unknown or conflicting
// outcome is resolved with FindTransaction over the versions after
// req.ParentVersion (the first attempt's parent; req.TxnID is fixed across
// attempts), before the first attempt and after each failed one, so the same
// files are never committed twice.
func (d *Dataset) CommitLatest(ctx context.Context, req CommitRequest, attempts int) (*CommitResult, error) {
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	first := req.ParentVersion
	if v, ok, err := d.FindTransaction(req.TxnID, first); err != nil {
		return nil, err
	} else if ok {
		return &CommitResult{Version: v, TxnID: req.TxnID}, nil
	}
	var lastErr error
	for i := 0; i < max(1, attempts); i++ {
		latest, err := d.LatestVersion()
		if err != nil {
			return nil, err
		}
		req.ParentVersion = latest
		res, err := d.Commit(ctx, req)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, ErrCommitConflict) && !errors.Is(err, ErrCommitUnknown) {
			return nil, err
		}
		lastErr = err
		if v, ok, ferr := d.FindTransaction(req.TxnID, first); ferr != nil {
			return nil, fmt.Errorf("%w (resolving: %v)", err, ferr)
		} else if ok {
			return &CommitResult{Version: v, TxnID: req.TxnID}, nil
		}
		if errors.Is(err, ErrCommitUnknown) {
			return nil, err // linked but unconfirmed and not visible: let the caller decide
		}
	}
	return nil, lastErr
}

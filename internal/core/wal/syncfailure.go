package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walctl/walctl/internal/core/durable"
)

// A sync that fails while a shard is recovered leaves the shard's files in
// a state no later open can trust in the same boot: Linux marks the pages
// the failed fsync covered clean although they never reached the disk, so
// the next open reads them from the page cache and its own syncs succeed.
// Unlike a failure in a live process (shard.syncFailed), recovery cannot
// cut them: it does not know which of the entries it found were
// acknowledged. So the failure is recorded in the shard directory, and
// every later open of the shard in the same boot refuses it, naming the
// record (DESIGN.md §3 rules 18, 24). After a reboot the page cache no
// longer hides what the disk holds: the record is removed and the shard
// recovered from what is durable. Within the boot an operator who has
// checked the disk removes the record by hand.

// syncFailedFile names the record of a sync that failed during recovery.
const syncFailedFile = "sync-failed"

// syncFailure is the content of the record.
type syncFailure struct {
	BootID string    `json:"boot_id"`
	At     time.Time `json:"at"`
	Error  string    `json:"error"`
}

// bootID identifies the running boot ("" where the system does not say).
var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// recordSyncFailure writes the record of a sync that failed during the
// shard's recovery. The file's name is what matters within the boot, and
// it is there as soon as it is written; its own syncs are attempted, but
// they may fail as the first did.
func (s *shard) recordSyncFailure(cause error) {
	p := filepath.Join(s.dir, syncFailedFile)
	b, _ := json.Marshal(syncFailure{BootID: bootID(), At: s.e.opts.Clock.Now().UTC(), Error: cause.Error()})
	err := os.WriteFile(p, append(b, '\n'), 0o644)
	if err == nil {
		if f, ferr := os.Open(p); ferr == nil {
			err = durable.SyncFile(f)
			f.Close()
		}
		err = errors.Join(err, durable.SyncDir(s.dir))
	}
	if err != nil {
		s.e.opts.Logger.Error("wal: recording a failed sync (the shard is refused until the record is read back)", "file", p, "err", err)
	}
}

// checkSyncFailure refuses the shard while a sync failed during an earlier
// recovery in this boot; it removes the record of one from an earlier boot.
func (s *shard) checkSyncFailure() error {
	p := filepath.Join(s.dir, syncFailedFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return unreadable(p, 0, s.trimmed+1, err)
	}
	var r syncFailure
	if json.Unmarshal(b, &r) == nil && r.BootID != "" && r.BootID != bootID() {
		s.e.opts.Logger.Warn("wal: a sync failed during recovery before the last reboot; recovering from what the disk holds",
			"table", s.t.name, "shard", s.id, "file", p, "at", r.At, "error", r.Error)
		return durable.Remove(p)
	}
	return corruptAt(p, 0, s.trimmed+1,
		"a sync failed while recovering this shard (%s, at %s): its files may show data the disk never got; reboot, or check the disk and remove this file, then reopen",
		r.Error, r.At.Format(time.RFC3339))
}

// wrapSyncFailure records err if it is a failed sync of the shard's
// recovery, and returns it.
func (s *shard) wrapSyncFailure(err error) error {
	if errors.Is(err, durable.ErrSyncFailed) {
		s.recordSyncFailure(err)
		return fmt.Errorf("%w (recorded in %s)", err, filepath.Join(s.dir, syncFailedFile))
	}
	return err
}

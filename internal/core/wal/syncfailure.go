package wal

import (
	"encoding/json"
	"errors"
	"fmt"
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

// syncFailedPrefix starts the name of the record of a sync that failed
// during recovery: sync-failed-<boot id>, the boot in its name so that a
// power cut that keeps the name and loses the content still tells which
// boot it was (sync-failed where the system gives no boot id).
const syncFailedPrefix = "sync-failed"

// syncFailure is the content of the record, for the operator.
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

// syncFailedName is the record's name in the running boot.
func syncFailedName() string {
	if id := bootID(); id != "" && ValidateName(id) == nil {
		return syncFailedPrefix + "-" + id
	}
	return syncFailedPrefix
}

// recordSyncFailure writes the record of a sync that failed during the
// shard's recovery. The file's name is what matters within the boot, and
// it is there as soon as it is created; its own syncs are attempted, but
// they may fail as the first did.
func (s *shard) recordSyncFailure(cause error) {
	p := filepath.Join(s.dir, syncFailedName())
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
		s.e.opts.Logger.Error("wal: recording a failed sync (the shard is refused while its name is there in this boot)", "file", p, "err", err)
	}
}

// checkSyncFailure refuses the shard while a sync failed during an earlier
// recovery in this boot (or in a boot it cannot tell); it removes the
// records of earlier boots.
func (s *shard) checkSyncFailure() error {
	names, err := filepath.Glob(filepath.Join(s.dir, syncFailedPrefix+"*"))
	if err != nil {
		return err
	}
	for _, p := range names {
		boot, named := strings.CutPrefix(filepath.Base(p), syncFailedPrefix+"-")
		if named && boot != bootID() {
			s.e.opts.Logger.Warn("wal: a sync failed during recovery in an earlier boot; recovering from what the disk holds",
				"table", s.t.name, "shard", s.id, "file", p)
			if err := durable.Remove(p); err != nil {
				return err
			}
			continue
		}
		what := "its record's content was lost"
		var r syncFailure
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &r) == nil {
			what = fmt.Sprintf("%s, at %s", r.Error, r.At.Format(time.RFC3339))
		}
		return corruptAt(p, 0, s.trimmed+1,
			"a sync failed while recovering this shard (%s): its files may show data the disk never got; reboot, or check the disk and remove this file, then reopen", what)
	}
	return nil
}

// wrapSyncFailure records err if it is a failed sync of the shard's
// recovery, and returns it.
func (s *shard) wrapSyncFailure(err error) error {
	if errors.Is(err, durable.ErrSyncFailed) {
		s.recordSyncFailure(err)
		return fmt.Errorf("%w (recorded in %s)", err, filepath.Join(s.dir, syncFailedName()))
	}
	return err
}

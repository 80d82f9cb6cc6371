package walraft

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// TestAppendInDoubtOnFrozenShard: a replica dies with an append in doubt
// (its progress record written, the engine never wrote the entry); at the
// restart the shard's recovery sync fails and freezes the shard. Whether
// the append landed cannot be told from a frozen shard: the replica must
// stop applying, not take the changed listing for the append having landed
// — once the shard is repaired (its sync-failed record removed) and the
// replica restarted, the append is applied at the position every other
// replica gave it.
func TestAppendInDoubtOnFrozenShard(t *testing.T) {
	dir := t.TempDir()
	f := openTestFSM(t, dir)
	f.Apply(createLog(t, 1))
	f.Apply(appendLog(t, 2, 10))
	f.Apply(appendLog(t, 3, 11))
	fp := f.fingerprint(context.Background(), command{Op: opAppend, Table: "t1"})
	if err := f.applied.write(appliedRec{Index: 4, Pending: true, FP: fp}); err != nil {
		t.Fatal(err)
	}
	f.close()

	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(durable.FailSync+"=error@0*1", ""); err != nil { // the shard's recovery sync
		t.Fatal(err)
	}
	f = openTestFSM(t, dir)
	failpoint.Reset()
	if r := f.Apply(appendLog(t, 4, 12)).(result); !errors.Is(r.err, errUndecidable) {
		t.Fatalf("replay of the append in doubt on a frozen shard: position %d, %v; want the replica stopped", r.pos, r.err)
	}
	f.close()

	records, _ := filepath.Glob(filepath.Join(dir, "wal", "tables", "t1", "shard-0000", "sync-failed*"))
	if len(records) != 1 {
		t.Fatalf("sync-failed records: %v", records)
	}
	os.Remove(records[0]) // the operator, after checking the disk
	f = openTestFSM(t, dir)
	defer f.close()
	r4 := f.Apply(appendLog(t, 4, 12)).(result)
	r5 := f.Apply(appendLog(t, 5, 13)).(result)
	if r4.err != nil || r4.pos != 3 || r5.err != nil || r5.pos != 4 {
		t.Fatalf("after the repair: index 4 at %d (%v), index 5 at %d (%v); want 3 and 4", r4.pos, r4.err, r5.pos, r5.err)
	}
}
